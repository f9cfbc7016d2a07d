// Streaming decode. Decoding is Rust's from_utf8_lossy over the concatenated token bytes, a left-to-
// right scan whose decision at each position depends only on bytes from there on; so everything up to
// a trailing, still-completable sequence is final and can be emitted now.
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace imp::text {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->token_bytes(id);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const unicode::Utf8Step step = unicode::next_utf8(pending_, pos);
    if (step.kind == unicode::Utf8Kind::kIncomplete) break;
    if (step.kind == unicode::Utf8Kind::kChar) {
      out.append(pending_, pos, step.length);
    } else {
      out += unicode::kReplacementUtf8;
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out = unicode::to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace imp::text
