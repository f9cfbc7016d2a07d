#include "runtime/stop_tokens.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace imp::runtime {

std::vector<int32_t> load_stop_tokens(const std::filesystem::path& model_dir, const model::ModelConfig& config) {
  std::vector<int32_t> stops(config.eos_token_ids.begin(), config.eos_token_ids.end());
  const std::filesystem::path path = model_dir / "generation_config.json";
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON: {}", path.string(), e.what());
    }
    const auto eos = json.find("eos_token_id");
    if (eos != json.end() && !eos->is_null()) {
      const nlohmann::json list = eos->is_array() ? *eos : nlohmann::json::array({*eos});
      for (const auto& id : list) {
        if (!id.is_number_integer()) fail("{}: eos_token_id must be an integer or a list of integers", path.string());
        stops.push_back(id.get<int32_t>());
      }
    }
  }
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  return stops;
}

}  // namespace imp::runtime
