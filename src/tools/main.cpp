// imp: an inference engine for qwen4_exp Mixture-of-Experts models.
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"imp: qwen4_exp inference engine"};
  app.require_subcommand(1);
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Only print errors");
  std::function<int()> run;
  imp::tools::add_generate(app, run);
  imp::tools::add_inspect(app, run);
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
