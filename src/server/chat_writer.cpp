// chat.completion and chat.completion.chunk, as OpenAI sends them (and its Python SDK parses them):
// reasoning as "reasoning_content", tool calls as "tool_calls" (streamed: the start with id, type and name,
// then the arguments), logprobs as {"content": [{token, logprob, bytes, top_logprobs}]}.
#include "server/response_writer.h"

namespace imp::server {
namespace {

using Json = nlohmann::ordered_json;

Json bytes_of(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

class ChatWriter final : public ResponseWriter {
 public:
  ChatWriter(const ResponseIds& ids, const ChatRequest& request, const text::Tokenizer& tokenizer)
      : ids_(ids), stream_(request.stream), include_usage_(request.include_usage), logprobs_(request.logprobs),
        top_logprobs_(request.top_logprobs), tokenizer_(tokenizer) {}

  bool streaming() const override { return stream_; }

  std::string piece(const Piece& piece) override {
    if (logprobs_) {
      for (const runtime::GeneratedToken& token : piece.tokens) pending_logprobs_.push_back(logprob_entry(token));
    }
    if (!stream_) {
      for (const text::OutputEvent& event : piece.events) text::apply_event(result_, event);
      return {};
    }
    std::string out = role_chunk();
    for (const text::OutputEvent& event : piece.events) out += sse_event(chunk(delta_of(event), nullptr));
    return out;
  }

  std::string finish(const Outcome& outcome) override {
    if (!outcome.error.empty()) {
      const Json error = error_body(500, outcome.error, "", "generation_failed");
      return stream_ ? sse_event(error) + "data: [DONE]\n\n" : dump_json(error);
    }
    if (!stream_) return dump_json(whole(outcome));
    std::string out = role_chunk();
    out += sse_event(chunk(Json::object(), outcome.finish_reason));
    if (include_usage_) {
      Json usage = header();
      usage["choices"] = Json::array();
      usage["usage"] = usage_json(outcome);
      out += sse_event(usage);
    }
    return out + "data: [DONE]\n\n";
  }

 private:
  Json header() const {
    return {{"id", ids_.id}, {"object", stream_ ? "chat.completion.chunk" : "chat.completion"}, {"created", ids_.created},
            {"model", ids_.model}, {"system_fingerprint", nullptr}};
  }

  // One chunk with one choice; takes the log-probabilities gathered since the last chunk.
  Json chunk(Json delta, const Json& finish_reason) {
    Json logprobs = nullptr;
    if (logprobs_ && !pending_logprobs_.empty()) logprobs = {{"content", std::exchange(pending_logprobs_, Json::array())}};
    Json out = header();
    out["choices"] = Json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                                   {"finish_reason", finish_reason}}});
    if (include_usage_) out["usage"] = nullptr;
    return out;
  }

  // OpenAI opens every stream with a chunk carrying the role.
  std::string role_chunk() {
    if (sent_role_) return {};
    sent_role_ = true;
    const Json saved = std::exchange(pending_logprobs_, Json::array());
    std::string out = sse_event(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
    pending_logprobs_ = saved;
    return out;
  }

  static Json delta_of(const text::OutputEvent& event) {
    switch (event.kind) {
      case text::OutputEventKind::reasoning: return {{"reasoning_content", event.text}};
      case text::OutputEventKind::content: return {{"content", event.text}};
      case text::OutputEventKind::tool_call_start:
        return {{"tool_calls", Json::array({{{"index", event.index}, {"id", event.id}, {"type", "function"},
                                             {"function", {{"name", event.name}, {"arguments", ""}}}}})}};
      case text::OutputEventKind::tool_call_arguments:
        return {{"tool_calls", Json::array({{{"index", event.index}, {"function", {{"arguments", event.text}}}}})}};
    }
    return Json::object();
  }

  Json logprob_entry(const runtime::GeneratedToken& token) const {
    Json top = Json::array();
    if (token.logprobs) {
      for (const runtime::TokenLogprob& alt : token.logprobs->top) {
        const std::string text = token_text(tokenizer_, alt.token);
        top.push_back({{"token", text}, {"logprob", alt.logprob}, {"bytes", bytes_of(text)}});
      }
    }
    const std::string text = token_text(tokenizer_, token.token);
    return {{"token", text}, {"logprob", token.logprobs ? token.logprobs->chosen.logprob : 0.0f},
            {"bytes", bytes_of(text)}, {"top_logprobs", std::move(top)}};
  }

  Json whole(const Outcome& outcome) {
    Json message = {{"role", "assistant"}};
    message["content"] = result_.content.empty() && result_.has_tool_calls() ? Json() : Json(result_.content);
    if (!result_.reasoning.empty()) message["reasoning_content"] = result_.reasoning;
    if (result_.has_tool_calls()) {
      Json calls = Json::array();
      for (const text::ToolCall& call : result_.tool_calls) {
        calls.push_back({{"id", call.id}, {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    Json logprobs = logprobs_ ? Json{{"content", pending_logprobs_}} : Json();
    Json out = header();
    out["choices"] = Json::array({{{"index", 0}, {"message", std::move(message)}, {"logprobs", std::move(logprobs)},
                                   {"finish_reason", outcome.finish_reason}}});
    out["usage"] = usage_json(outcome);
    return out;
  }

  ResponseIds ids_;
  bool stream_;
  bool include_usage_;
  bool logprobs_;
  int top_logprobs_;
  const text::Tokenizer& tokenizer_;
  bool sent_role_ = false;
  text::ParsedOutput result_;
  Json pending_logprobs_ = Json::array();
};

}  // namespace

std::unique_ptr<ResponseWriter> make_chat_writer(const ResponseIds& ids, const ChatRequest& request,
                                                 const text::Tokenizer& tokenizer) {
  return std::make_unique<ChatWriter>(ids, request, tokenizer);
}

}  // namespace imp::server
