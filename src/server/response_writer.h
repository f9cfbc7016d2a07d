// OpenAI response bodies: chat.completion / chat.completion.chunk and text_completion, whole or as
// server-sent events. A writer is fed the pieces of one generation and produces the bytes to send.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/request.h"
#include "text/tokenizer.h"

namespace imp::server {

struct ResponseIds {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Streaming: the SSE events for this piece (may be empty). Non-streaming: accumulates, returns "".
  virtual std::string piece(const Piece& piece) = 0;
  // Streaming: the final chunk(s), the usage chunk when asked and [DONE]. Non-streaming: the whole body.
  // An outcome with an error gives an SSE error event (streaming) or an error body.
  virtual std::string finish(const Outcome& outcome) = 0;
  virtual bool streaming() const = 0;
};

std::unique_ptr<ResponseWriter> make_chat_writer(const ResponseIds& ids, const ChatRequest& request,
                                                 const text::Tokenizer& tokenizer);
std::unique_ptr<ResponseWriter> make_completion_writer(const ResponseIds& ids, const CompletionRequest& request,
                                                       const text::Tokenizer& tokenizer);

// Shared by the writers and the HTTP layer.
std::string dump_json(const nlohmann::ordered_json& json);  // compact; invalid UTF-8 becomes U+FFFD
std::string sse_event(const nlohmann::ordered_json& json);  // "data: {...}\n\n"
nlohmann::ordered_json error_body(int status, const std::string& message, const std::string& param = {},
                                  const std::string& code = {});
nlohmann::ordered_json usage_json(const Outcome& outcome);
std::string token_text(const text::Tokenizer& tokenizer, int32_t token);  // the token's bytes as a string

}  // namespace imp::server
