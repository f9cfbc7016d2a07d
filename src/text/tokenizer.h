// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json, producing exactly the ids of
// `tokenizers` (encode with add_special_tokens=False) and the same decoded text.
//
// Supported (what Qwen files use): model BPE (vocab, merges as "a b" or [a, b], ignore_merges),
// normalizer NFC / null / Sequence of NFC, pre_tokenizer ByteLevel(use_regex=false) optionally after
// one Split(Regex, Isolated, invert=false), decoder ByteLevel, post_processor ByteLevel / null, and
// added tokens with single_word / lstrip / rstrip / normalized / special. Anything else (other models,
// normalizers, pre-tokenizers or decoders, byte_fallback, dropout, truncation, padding, ...) is
// refused with an imp::Error naming it.
//
// Input that is not valid UTF-8 is accepted: each ill-formed sequence is replaced by U+FFFD (one per
// maximal subpart, as Rust's from_utf8_lossy and Python's errors="replace" do) before encoding, so
// the ids are those `tokenizers` gives for the replaced text. Ids the tokenizer does not know are
// skipped by decode, as `tokenizers` does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/added_vocabulary.h"

namespace imp::text {

// What tokenizer_config.json says about BOS/EOS (absent file: all defaults).
struct TokenizerConfig {
  bool add_bos_token = false;
  bool add_eos_token = false;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
};

class Tokenizer {
 public:
  // `path` is a model folder holding tokenizer.json or the tokenizer.json file itself; a
  // tokenizer_config.json beside it is read when present.
  static Tokenizer load(const std::filesystem::path& path);
  // From file contents (config_json may be empty). `origin` names the source in error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             std::string_view origin = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Special and added tokens in the text are recognised (no BOS/EOS is added). Thread-safe.
  std::vector<int32_t> encode(std::string_view text) const;
  // Also gives, per id, the index of the piece it came from (`tokenizers`' Encoding.word_ids).
  std::vector<int32_t> encode(std::string_view text, std::vector<int32_t>* word_ids) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One more than the largest id (the size an embedding table needs).
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token as tokenizer.json spells it (byte-level characters for model tokens).
  std::optional<std::string> id_to_token(int32_t id) const;
  // The bytes decoding `id` contributes (empty for unknown ids).
  std::string_view token_bytes(int32_t id) const;
  bool is_known(int32_t id) const;
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  const TokenizerConfig& config() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;

  struct Impl;  // internal (tokenizer_impl.h)
  explicit Tokenizer(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Turns ids back into text while they are generated. Each push returns the text that is final: only
// complete UTF-8 characters, holding back the bytes of a character still incomplete. finish() flushes
// what is held (an incomplete tail becomes U+FFFD) and resets. The pushes and finish concatenate to
// exactly decode(all ids).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace imp::text
