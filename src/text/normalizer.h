// The text normalizer: none or Unicode NFC (utf8proc), matching what `tokenizers` produces.
#pragma once

#include <string>
#include <string_view>

namespace imp::text {

class Normalizer {
 public:
  enum class Kind { kNone, kNfc };

  Normalizer() = default;
  explicit Normalizer(Kind kind) : kind_(kind) {}

  Kind kind() const { return kind_; }
  // Writes the normalized text into `out` and returns true, or returns false when `text` is already
  // normalized (the common case for ASCII, which is checked without copying).
  bool normalize(std::string_view text, std::string& out) const;
  std::string apply(std::string_view text) const;

 private:
  Kind kind_ = Kind::kNone;
};

// NFC of valid UTF-8 as `tokenizers` computes it (see normalizer.cpp for its one known divergence).
std::string nfc(std::string_view text);

}  // namespace imp::text
