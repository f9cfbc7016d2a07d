// The `imp` subcommands. Each command file registers itself with a static Registration, so adding a
// command means adding one file: its setup function declares the options on the CLI11 app and sets `run`
// to the function that executes the command when it is the one chosen.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace imp::tools {

using CommandSetup = void (*)(CLI::App& app, std::function<int()>& run);

std::vector<CommandSetup>& command_registry();

struct Registration {
  explicit Registration(CommandSetup setup) { command_registry().push_back(setup); }
};

}  // namespace imp::tools
