// The `imp` subcommands. Each registers its options on the CLI11 app and returns the exit code when run.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace imp::tools {

// Adds a subcommand; `run` is set to the function that executes it when it is the one chosen.
void add_generate(CLI::App& app, std::function<int()>& run);
void add_inspect(CLI::App& app, std::function<int()>& run);

}  // namespace imp::tools
