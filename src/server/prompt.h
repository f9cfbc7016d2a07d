// What the server knows about the model it serves, and requests -> prompt tokens: the chat template
// renders messages and tools, the tokenizer encodes, and the context limits are checked (400s naming the
// numbers). Also the output parser settings each request needs (reasoning, tool calls, tool schemas).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/encode_pool.h"
#include "server/request.h"
#include "text/chat_template.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"
#include "text/tool_call_opening.h"

namespace imp::server {

struct ServedModel {
  std::string id;  // what clients pass as "model"
  text::Tokenizer tokenizer;
  std::optional<text::ChatTemplate> chat_template;  // none: chat requests are refused with a 400
  text::ToolCallFormat tool_call_format = text::ToolCallFormat::unknown;  // what tool_choice required/named force
  std::vector<int32_t> stop_tokens;
  int64_t max_context = 0;  // prompt + generated tokens
  int64_t vocab_size = 0;
  std::unique_ptr<EncodePool> encoder;  // encode() runs here, on a few threads (see encode_pool.h)

  std::vector<int32_t> encode(std::string_view text) const { return encoder->encode(text); }

  // Reads the tokenizer and chat template of a model folder. Not movable in effect (the encoder refers to
  // the tokenizer), hence the pointer.
  static std::unique_ptr<ServedModel> load(const std::filesystem::path& model_dir, std::string id, std::vector<int32_t> stop_tokens,
                          int64_t max_context, int64_t vocab_size);
};

struct PreparedPrompt {
  std::vector<int32_t> tokens;  // with a forced tool-call opening at the end (tool_choice required/named)
  int64_t max_tokens = 0;  // the request's, or what is left of the context
  text::OutputParserOptions parser;
};

PreparedPrompt prepare_chat(const ServedModel& model, const ChatRequest& request);
PreparedPrompt prepare_completion(const ServedModel& model, const CompletionRequest& request);

}  // namespace imp::server
