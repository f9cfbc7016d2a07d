// imp: an inference engine for qwen4_exp Mixture-of-Experts models.
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tools/commands.h"

namespace imp::tools {
std::vector<CommandSetup>& command_registry() {
  static std::vector<CommandSetup> registry;
  return registry;
}
}  // namespace imp::tools

int main(int argc, char** argv) {
  CLI::App app{"imp: qwen4_exp inference engine"};
  app.require_subcommand(1);
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Only print errors");
  std::function<int()> run;
  for (imp::tools::CommandSetup setup : imp::tools::command_registry()) setup(app, run);
  CLI11_PARSE(app, argc, argv);
  if (quiet) imp::log::set_level(imp::log::Level::kError);
  try {
    return run();
  } catch (const imp::Error& error) {
    std::fprintf(stderr, "imp: error: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "imp: internal error: %s\n", error.what());
    return 2;
  }
}
