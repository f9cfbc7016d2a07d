// OpenAI request bodies -> typed requests, with every field checked: a problem throws ApiError (400) naming
// the field. Pure (no model, no tokenizer), so it is what the fuzz target drives (fuzz/request_fuzzer.cpp).
// Context limits (prompt length, max_tokens against the context) need the tokenizer: see prompt.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"

namespace imp::server {

// Fields both endpoints share.
struct GenerationParams {
  std::string model;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::optional<int64_t> max_tokens;   // max_completion_tokens wins over max_tokens
  runtime::SamplingOptions sampling;
  bool has_seed = false;
  std::vector<std::string> stop;       // stop strings, at most 4, never in the output
  bool ignore_eos = false;             // vLLM's extension: generate max_tokens whatever the model says
  // Test-only (servers started with --test-forced-output): generate exactly this text's tokens instead of
  // sampling, through the same engine, detokenizer and parser path. Request field "imp_forced_output".
  std::optional<std::string> forced_output;
};

enum class ToolChoice { automatic, none, required, named };

struct ChatRequest : GenerationParams {
  nlohmann::ordered_json messages;  // non-empty; content parts joined to strings, developer -> system
  nlohmann::ordered_json tools;     // null or a non-empty array of {"type":"function","function":{...}}
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_name;  // ToolChoice::named
  bool logprobs = false;
  int top_logprobs = 0;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

struct CompletionRequest : GenerationParams {
  std::string prompt;                 // text, or
  std::vector<int32_t> prompt_tokens; // token ids (when prompt_is_tokens)
  bool prompt_is_tokens = false;
  int logprobs = -1;                  // -1: off; 0..5 alternatives
};

// Nesting deeper than this is refused before parsing (bounds recursion in the parser and templates).
inline constexpr int kMaxJsonDepth = 64;

// Parses and validates the body; throws ApiError.
nlohmann::ordered_json parse_json_object(std::string_view body);
ChatRequest parse_chat_request(std::string_view body);
CompletionRequest parse_completion_request(std::string_view body);

}  // namespace imp::server
