// The model-loading flags shared by every command that loads a model: --backend, --load-format, --max-context.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/engine.h"

namespace imp::tools {

void add_engine_options(CLI::App& cmd, runtime::EngineOptions& options);

}  // namespace imp::tools
