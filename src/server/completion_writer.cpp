// text_completion, whole or streamed, with the legacy logprobs layout
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
#include "server/response_writer.h"

namespace imp::server {
namespace {

using Json = nlohmann::ordered_json;

class CompletionWriter final : public ResponseWriter {
 public:
  CompletionWriter(const ResponseIds& ids, const CompletionRequest& request, const text::Tokenizer& tokenizer)
      : ids_(ids), stream_(request.stream), include_usage_(request.include_usage), logprobs_(request.logprobs),
        tokenizer_(tokenizer) {}

  bool streaming() const override { return stream_; }

  std::string piece(const Piece& piece) override {
    std::string text;
    for (const text::OutputEvent& event : piece.events) text += event.text;  // completions: content only
    Json logprobs = logprobs_ >= 0 ? logprobs_of(piece) : Json();
    if (!stream_) {
      text_ += text;
      if (logprobs_ >= 0) {
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
          for (Json& item : logprobs[key]) all_logprobs_[key].push_back(std::move(item));
        }
      }
      return {};
    }
    if (text.empty() && logprobs.is_null()) return {};
    return sse_event(choice(text, std::move(logprobs), nullptr));
  }

  std::string finish(const Outcome& outcome) override {
    if (!outcome.error.empty()) {
      const Json error = error_body(500, outcome.error, "", "generation_failed");
      return stream_ ? sse_event(error) + "data: [DONE]\n\n" : dump_json(error);
    }
    if (!stream_) {
      Json out = choice(text_, logprobs_ >= 0 ? all_logprobs_ : Json(), outcome.finish_reason);
      out["usage"] = usage_json(outcome);
      return dump_json(out);
    }
    std::string out = sse_event(choice("", nullptr, outcome.finish_reason));
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
    return {{"id", ids_.id}, {"object", "text_completion"}, {"created", ids_.created}, {"model", ids_.model},
            {"system_fingerprint", nullptr}};
  }

  Json choice(const std::string& text, Json logprobs, const Json& finish_reason) const {
    Json out = header();
    out["choices"] = Json::array({{{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)},
                                   {"finish_reason", finish_reason}}});
    if (stream_ && include_usage_) out["usage"] = nullptr;
    return out;
  }

  Json logprobs_of(const Piece& piece) {
    Json out = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                {"text_offset", Json::array()}};
    for (const runtime::GeneratedToken& token : piece.tokens) {
      const std::string text = token_text(tokenizer_, token.token);
      out["tokens"].push_back(text);
      out["token_logprobs"].push_back(token.logprobs ? token.logprobs->chosen.logprob : 0.0f);
      Json top = Json::object();
      if (token.logprobs) {
        for (const runtime::TokenLogprob& alt : token.logprobs->top) top[token_text(tokenizer_, alt.token)] = alt.logprob;
      }
      out["top_logprobs"].push_back(std::move(top));
      out["text_offset"].push_back(offset_);
      offset_ += static_cast<int64_t>(text.size());
    }
    return out;
  }

  ResponseIds ids_;
  bool stream_;
  bool include_usage_;
  int logprobs_;
  const text::Tokenizer& tokenizer_;
  std::string text_;
  int64_t offset_ = 0;
  Json all_logprobs_ = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                        {"text_offset", Json::array()}};
};

}  // namespace

std::unique_ptr<ResponseWriter> make_completion_writer(const ResponseIds& ids, const CompletionRequest& request,
                                                       const text::Tokenizer& tokenizer) {
  return std::make_unique<CompletionWriter>(ids, request, tokenizer);
}

}  // namespace imp::server
