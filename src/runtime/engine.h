// The Engine seam: what the sampler, scheduler, server and tools drive, implemented by each backend.
// A sequence is an id; its state (KV, recurrent and PLE state) lives in the backend and is owned per sequence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "runtime/sampler.h"

namespace imp::runtime {

using SequenceId = uint64_t;

// Asks Engine::forward_sampled for the token chosen from the request's last logits row instead of the row:
// runtime::sample_token's rule with u = sampling_uniform(options.seed, draw), the same token on every backend.
// Presence/frequency penalties and logprobs need the row on the host: ask for logits (forward) instead.
struct TokenSampling {
  SamplingOptions options;  // its penalties must be 0
  uint64_t draw = 0;        // the draw index (Sampler::take_draw)
};

struct ForwardRequest {
  SequenceId sequence = 0;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // true: one row per token; false: the last token's row only
  // forward_sampled: choose the token from the last row (no logits come back unless all_logits);
  // forward ignores it.
  std::optional<TokenSampling> sampling = std::nullopt;
};

// Throws imp::Error when a request's `sampling` asks for what needs the logits row on the host (penalties);
// called before any sequence of the batch moves.
void check_token_sampling(std::span<const ForwardRequest> batch);

struct ForwardResult {
  std::vector<float> logits;  // as forward returns them; empty for a sampled request without all_logits
  int32_t token = -1;         // the chosen token, for a request with `sampling`
};

// What `imp bench` needs beyond the seam from a GPU backend: device-chained decode, the bytes a decode
// token reads (for the roofline) and the measured read bandwidth.
class DeviceBenchmark {
 public:
  virtual ~DeviceBenchmark() = default;
  virtual std::string device_name() const = 0;
  // Bytes of weights one decode token reads (dense + top-k experts + PLE rows).
  virtual uint64_t decode_bytes_per_token() const = 0;
  // Measured device-memory read bandwidth in bytes/s (a streaming read of a large buffer, median of runs).
  virtual double measure_read_bandwidth() = 0;
  // Sets the sequence to `tokens` tokens of random cache contents without running the model: a decode step's
  // cost depends on the context length, not on the values (benchmarks only).
  virtual void fill_context(SequenceId sequence, int64_t tokens) = 0;
  // One untimed step on `token`, then `steps` greedy steps chained on the device; their wall time in ms.
  virtual double decode_greedy_on_device(SequenceId sequence, int32_t token, int32_t steps,
                                         std::vector<int32_t>* tokens = nullptr) = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const model::ModelConfig& config() const = 0;
  virtual std::string backend_name() const = 0;

  // The longest sequence this engine holds (its context length, decided at load).
  virtual int64_t max_context() const { return config().max_position_embeddings; }
  // Tokens the KV cache holds across all sequences; 0: bounded only by host memory (the CPU reference).
  virtual int64_t kv_capacity_tokens() const { return 0; }

  virtual SequenceId new_sequence() = 0;
  // A new sequence with a copy of `source`'s state (prefix reuse, speculation rollback points).
  virtual SequenceId fork(SequenceId source) = 0;
  virtual void release(SequenceId sequence) = 0;
  virtual int64_t sequence_length(SequenceId sequence) const = 0;

  // Appends each request's tokens to its sequence; returns its logits rows (row-major, vocab_size wide).
  virtual std::vector<std::vector<float>> forward(std::span<const ForwardRequest> batch) = 0;
  // As forward, but a request with `sampling` gets its token chosen by the backend (a GPU backend on the
  // device, copying back the token instead of the row). The default runs forward and samples on the host.
  virtual std::vector<ForwardResult> forward_sampled(std::span<const ForwardRequest> batch);

  // GPU backends: benchmark hooks (nullptr on the CPU reference).
  virtual DeviceBenchmark* device_benchmark() { return nullptr; }
};

struct EngineOptions {
  std::string backend = "cpu";
  // "checkpoint": the folder's safetensors; "dummy": random weights of config.json's shapes (benchmarks,
  // CUDA backend only).
  std::string load_format = "checkpoint";
  int64_t max_context = 0;  // 0: decided by the backend (logged)
};

// Loads a model folder on the chosen backend; throws imp::Error with an actionable message.
std::unique_ptr<Engine> load_engine(const std::filesystem::path& model_dir, const EngineOptions& options);

// Backends other than the CPU reference register here (the CUDA library does, when it is linked in).
using BackendFactory = std::unique_ptr<Engine> (*)(const std::filesystem::path& model_dir, const EngineOptions& options);
void register_backend(const std::string& name, BackendFactory factory);

}  // namespace imp::runtime
