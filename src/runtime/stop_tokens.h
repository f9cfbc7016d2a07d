// The token ids that end a generation: the config's eos_token_id plus generation_config.json's
// eos_token_id (int or list) when the model folder has one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "model/config.h"

namespace imp::runtime {

std::vector<int32_t> load_stop_tokens(const std::filesystem::path& model_dir, const model::ModelConfig& config);

}  // namespace imp::runtime
