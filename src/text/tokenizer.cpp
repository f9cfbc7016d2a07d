// Encoding follows `tokenizers`' pipeline: added tokens are cut out of the raw text (normalized=false
// ones), each stretch between them is normalized and searched for the normalized added tokens, then
// pre-tokenized by the Split regex and each piece's bytes are BPE-encoded.
#include "text/tokenizer.h"

#include "text/byte_level.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace imp::text {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text) const { return encode(text, nullptr); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, std::vector<int32_t>* word_ids) const {
  const Impl& m = *impl_;
  std::string valid;
  if (!unicode::is_valid_utf8(text)) {
    valid = unicode::to_valid_utf8(text);
    text = valid;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 8);
  if (word_ids != nullptr) word_ids->clear();
  int32_t word = 0;
  auto end_word = [&] {
    if (word_ids != nullptr) word_ids->resize(ids.size(), word);
    ++word;
  };
  auto encode_stretch = [&](std::string_view stretch) {
    PreTokenizer::Pieces pieces(m.pre_tokenizer, stretch);
    std::string_view piece;
    while (pieces.next(piece)) {
      m.model->encode(piece, ids);
      end_word();
    }
  };

  std::vector<AddedVocabulary::Split> raw_splits;
  std::vector<AddedVocabulary::Split> normalized_splits;
  std::string normalized;
  m.added.split(text, /*normalized_pass=*/false, raw_splits);
  for (const AddedVocabulary::Split& raw : raw_splits) {
    if (raw.end == raw.begin) continue;
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      end_word();
      continue;
    }
    std::string_view stretch = text.substr(raw.begin, raw.end - raw.begin);
    if (m.normalizer.normalize(stretch, normalized)) stretch = normalized;
    if (m.added.empty(/*normalized_pass=*/true)) {
      encode_stretch(stretch);
      continue;
    }
    normalized_splits.clear();
    m.added.split(stretch, /*normalized_pass=*/true, normalized_splits);
    for (const AddedVocabulary::Split& split : normalized_splits) {
      if (split.end == split.begin) continue;
      if (split.id >= 0) {
        ids.push_back(split.id);
        end_word();
      } else {
        encode_stretch(stretch.substr(split.begin, split.end - split.begin));
      }
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!is_known(id) || (skip_special_tokens && impl_->special[id])) continue;
    bytes += impl_->bytes[id];
  }
  return unicode::is_valid_utf8(bytes) ? bytes : unicode::to_valid_utf8(bytes);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->known.size()); }

bool Tokenizer::is_known(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->known.size() && impl_->known[id];
}

bool Tokenizer::is_special(int32_t id) const { return is_known(id) && impl_->special[id]; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->by_spelling.find(std::string(token)); it != impl_->by_spelling.end()) return it->second;
  if (auto bytes = byte_level::chars_to_bytes(token)) return impl_->model->id_of(*bytes);
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (!is_known(id)) return std::nullopt;
  if (auto it = impl_->spelled.find(id); it != impl_->spelled.end()) return it->second;
  return byte_level::bytes_to_chars(impl_->bytes[id]);
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  return is_known(id) ? std::string_view(impl_->bytes[id]) : std::string_view();
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added_tokens; }
const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

std::optional<int32_t> Tokenizer::bos_token_id() const {
  return impl_->config.bos_token ? token_to_id(*impl_->config.bos_token) : std::nullopt;
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
  return impl_->config.eos_token ? token_to_id(*impl_->config.eos_token) : std::nullopt;
}

}  // namespace imp::text
