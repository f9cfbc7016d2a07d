// The sampling flags shared by the commands that generate (generate, chat), validated by CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/sampler.h"

namespace imp::tools {

void add_sampling_options(CLI::App& cmd, runtime::SamplingOptions& sampling);

}  // namespace imp::tools
