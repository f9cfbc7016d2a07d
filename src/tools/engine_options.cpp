#include "tools/engine_options.h"

namespace imp::tools {

void add_engine_options(CLI::App& cmd, runtime::EngineOptions& options) {
  cmd.add_option("--backend", options.backend, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--load-format", options.load_format,
                 "checkpoint, or dummy: random weights of config.json's shapes (GPU benchmarks without a checkpoint)")
      ->check(CLI::IsMember({"checkpoint", "dummy"}))
      ->capture_default_str();
  cmd.add_option("--max-context", options.max_context, "Context length in tokens (default: decided from memory, logged)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace imp::tools
