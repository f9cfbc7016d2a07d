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
