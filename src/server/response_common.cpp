#include "server/api_error.h"
#include "server/response_writer.h"

namespace imp::server {

std::string dump_json(const nlohmann::ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::ordered_json& json) { return "data: " + dump_json(json) + "\n\n"; }

nlohmann::ordered_json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const ApiError error(status, message);
  return {{"error", {{"message", message},
                     {"type", error.type()},
                     {"param", param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param)},
                     {"code", code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(code)}}}};
}

nlohmann::ordered_json usage_json(const Outcome& outcome) {
  return {{"prompt_tokens", outcome.prompt_tokens},
          {"completion_tokens", outcome.completion_tokens},
          {"total_tokens", outcome.prompt_tokens + outcome.completion_tokens}};
}

std::string token_text(const text::Tokenizer& tokenizer, int32_t token) {
  return std::string(tokenizer.token_bytes(token));
}

}  // namespace imp::server
