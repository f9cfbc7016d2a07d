// The CUDA backend behind the Engine seam: weights on the device (DeviceModel), per-sequence device state,
// the decode step captured per sequence as CUDA graphs (one per DecodeRegime) and replayed; prompts run in
// chunks through the prefill path (sized by the memory plan). Not thread-safe: one thread drives it (the
// scheduler's worker).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>

#include "cuda/device_model.h"
#include "cuda/forward.h"
#include "cuda/kernels/sampling.h"
#include "cuda/memory/kv_cache.h"
#include "cuda/prefill.h"
#include "cuda/sequence_state.h"
#include "model/checkpoint.h"
#include "runtime/engine.h"

namespace imp::cuda {

class CudaEngine final : public runtime::Engine, public runtime::DeviceBenchmark {
 public:
  CudaEngine(const std::filesystem::path& model_dir, const runtime::EngineOptions& options);
  ~CudaEngine() override;

  const model::ModelConfig& config() const override { return config_; }
  std::string backend_name() const override { return "cuda"; }
  int64_t max_context() const override { return context_; }
  int64_t kv_capacity_tokens() const override { return static_cast<int64_t>(kv_->total_pages()) * KvCache::kPageSize; }
  runtime::SequenceId new_sequence() override;
  runtime::SequenceId fork(runtime::SequenceId source) override;
  void release(runtime::SequenceId sequence) override;
  int64_t sequence_length(runtime::SequenceId sequence) const override;
  std::vector<std::vector<float>> forward(std::span<const runtime::ForwardRequest> batch) override;
  // Sampled requests: the token is chosen on the device from the logits row there (the decode graph's argmax
  // when greedy, else launch_sample_tokens) and 4 bytes come back instead of the row.
  std::vector<runtime::ForwardResult> forward_sampled(std::span<const runtime::ForwardRequest> batch) override;

  runtime::DeviceBenchmark* device_benchmark() override { return this; }

  // Benchmarks (runtime::DeviceBenchmark). decode_greedy_on_device: with `tokens`, also the steps + 1 greedy
  // tokens chosen (recording adds one tiny copy per step).
  std::string device_name() const override;
  uint64_t decode_bytes_per_token() const override { return model_->decode_bytes_per_token(); }
  double measure_read_bandwidth() override;
  void fill_context(runtime::SequenceId sequence, int64_t tokens) override;
  double decode_greedy_on_device(runtime::SequenceId sequence, int32_t token, int32_t steps,
                                 std::vector<int32_t>* tokens = nullptr) override;

  const DeviceModel& device_model() const { return *model_; }

 private:
  SequenceStateDevice& at(runtime::SequenceId id) const;
  void step(SequenceStateDevice& sequence, int32_t token);  // enqueue one token (graph replay)
  // The captured decode step for a step at `position` (one per DecodeRegime, captured at the sequence's first step).
  cudaGraphExec_t decode_graph(SequenceStateDevice& sequence, int64_t position);
  // Runs a chunk of prompt tokens; appends the logits asked for (all rows, or the last row when `last` and
  // `download_last`); returns the last token's logits row on the device when `last` (else nullptr).
  const float* prefill_chunk(SequenceStateDevice& sequence, std::span<const int32_t> tokens, bool all_rows, bool last,
                             bool download_last, std::vector<float>& logits);
  void download_logits(const float* device, size_t rows, std::vector<float>& out);
  // One request: its logits (unless it is sampled and all_logits is off), and with `sample` its token.
  runtime::ForwardResult run_request(const runtime::ForwardRequest& request, bool sample);
  // The token `sampling` chooses from a device logits row; `greedy` (optional): the row's argmax, on the device.
  int32_t choose_token(const float* row, const int32_t* greedy, const runtime::TokenSampling& sampling);

  model::ModelConfig config_;
  std::unique_ptr<DeviceModel> model_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<DecodeWorkspace> workspace_;
  std::unique_ptr<PrefillWorkspace> prefill_;
  DeviceBuffer<float> prefill_logits_;  // [kLogitRows, vocab]: all-rows logits of a prefill chunk, in groups
  int64_t context_ = 0;
  cudaStream_t stream_ = nullptr;
  float* host_logits_ = nullptr;  // pinned [kLogitRows, vocab]
  DeviceBuffer<SampleParams> sample_params_;  // [1]: a sampled request's parameters
  DeviceBuffer<int32_t> sampled_token_;        // [1]: its token
  std::map<runtime::SequenceId, std::unique_ptr<SequenceStateDevice>> sequences_;
  runtime::SequenceId next_id_ = 1;
};

}  // namespace imp::cuda
