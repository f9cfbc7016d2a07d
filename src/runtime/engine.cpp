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

}  // namespace

std::unique_ptr<Engine> load_engine(const std::filesystem::path& model_dir, const EngineOptions& options) {
  if (options.backend == "cpu") return std::make_unique<CpuEngine>(model_dir);
  if (options.backend == "cuda") {
    fail("backend 'cuda' is not built into this binary yet (the CUDA engine is a later issue); use --backend cpu");
  }
  fail("unknown backend '{}': expected cpu or cuda", options.backend);
}

}  // namespace imp::runtime
