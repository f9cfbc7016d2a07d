#include "runtime/engine.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "cpu/forward.h"

namespace imp::runtime {
namespace {

// The CPU reference backend behind the Engine seam.
class CpuEngine final : public Engine {
 public:
  explicit CpuEngine(const std::filesystem::path& model_dir) : model_(model_dir) {}

  const model::ModelConfig& config() const override { return model_.config(); }
  std::string backend_name() const override { return "cpu"; }

  SequenceId new_sequence() override {
    std::lock_guard lock(mutex_);
    const SequenceId id = next_id_++;
    sequences_.emplace(id, model_.new_state());
    return id;
  }

  SequenceId fork(SequenceId source) override {
    std::lock_guard lock(mutex_);
    cpu::SequenceState copy = at(source);
    const SequenceId id = next_id_++;
    sequences_.emplace(id, std::move(copy));
    return id;
  }

  void release(SequenceId sequence) override {
    std::lock_guard lock(mutex_);
    sequences_.erase(sequence);
  }

  int64_t sequence_length(SequenceId sequence) const override {
    std::lock_guard lock(mutex_);
    return at(sequence).length;
  }

  std::vector<std::vector<float>> forward(std::span<const ForwardRequest> batch) override {
    std::vector<std::vector<float>> out;
    for (const ForwardRequest& request : batch) {
      cpu::SequenceState* state;
      {
        std::lock_guard lock(mutex_);
        state = &at(request.sequence);
      }
      out.push_back(model_.forward(*state, request.tokens, request.all_logits));
    }
    return out;
  }

 private:
  cpu::SequenceState& at(SequenceId id) {
    auto it = sequences_.find(id);
    if (it == sequences_.end()) fail("unknown sequence {}", id);
    return it->second;
  }
  const cpu::SequenceState& at(SequenceId id) const { return const_cast<CpuEngine*>(this)->at(id); }

  cpu::Model model_;
  mutable std::mutex mutex_;
  std::map<SequenceId, cpu::SequenceState> sequences_;
  SequenceId next_id_ = 1;
};

std::map<std::string, BackendFactory>& backends() {
  static std::map<std::string, BackendFactory> registry;
  return registry;
}

}  // namespace

void check_token_sampling(std::span<const ForwardRequest> batch) {
  for (const ForwardRequest& request : batch) {
    if (request.sampling && (request.sampling->options.presence_penalty != 0.0f ||
                             request.sampling->options.frequency_penalty != 0.0f)) {
      fail("forward_sampled cannot apply presence/frequency penalties: request the logits and use runtime::Sampler");
    }
  }
}

std::vector<ForwardResult> Engine::forward_sampled(std::span<const ForwardRequest> batch) {
  check_token_sampling(batch);
  std::vector<std::vector<float>> rows = forward(batch);
  const size_t vocab = static_cast<size_t>(config().vocab_size);
  std::vector<ForwardResult> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardRequest& request = batch[i];
    if (request.sampling) {
      if (rows[i].size() < vocab) fail("forward returned no logits row to sample from");
      const std::span<const float> last(rows[i].data() + rows[i].size() - vocab, vocab);
      const TokenSampling& s = *request.sampling;
      out[i].token = sample_token(last, s.options, sampling_uniform(s.options.seed, s.draw));
      if (!request.all_logits) rows[i] = {};
    }
    out[i].logits = std::move(rows[i]);
  }
  return out;
}

void register_backend(const std::string& name, BackendFactory factory) { backends()[name] = factory; }

std::unique_ptr<Engine> load_engine(const std::filesystem::path& model_dir, const EngineOptions& options) {
  if (options.load_format != "checkpoint" && options.load_format != "dummy") {
    fail("unknown load format '{}': expected checkpoint or dummy", options.load_format);
  }
  if (options.backend == "cpu") {
    if (options.load_format == "dummy") fail("dummy weights exist only on the GPU: use --backend cuda");
    return std::make_unique<CpuEngine>(model_dir);
  }
  auto it = backends().find(options.backend);
  if (it != backends().end()) return it->second(model_dir, options);
  if (options.backend == "cuda") {
    fail("backend 'cuda' is not in this binary: build with the cuda preset (cmake --preset cuda) to get it");
  }
  fail("unknown backend '{}': expected cpu or cuda", options.backend);
}

}  // namespace imp::runtime
