// UTF-8 helpers and the character classes the tokenizer needs, as Hugging Face `tokenizers` applies
// them. The class tables (unicode_tables.cpp) are generated from probes of the pinned `tokenizers`
// release, because its regex engines use newer Unicode data than the PCRE2 and utf8proc we link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace imp::text::unicode {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

// A set of code points as sorted, disjoint, inclusive ranges.
class CodePointSet {
 public:
  template <size_t N>
  constexpr explicit CodePointSet(const CodePointRange (&ranges)[N]) : ranges_(ranges, N) {}
  bool contains(char32_t c) const;
  std::span<const CodePointRange> ranges() const { return ranges_; }

 private:
  std::span<const CodePointRange> ranges_;
};

// Oniguruma's \p{L}, \p{N}, \p{M} and \s: what the pre-tokenizer regex means in `tokenizers`.
extern const CodePointSet kLetter;
extern const CodePointSet kNumber;
extern const CodePointSet kMark;
extern const CodePointSet kRegexSpace;
// Rust regex's \w and \s: what added tokens' single_word, lstrip and rstrip test.
extern const CodePointSet kWord;
extern const CodePointSet kSpace;
// Marks that `tokenizers`' NFC (older Unicode data) treats as inert starters (see normalizer.cpp).
extern const CodePointSet kNfcInert;

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// What the bytes at `pos` hold. kChar: one well-formed character of `length` bytes. kInvalid: an
// ill-formed maximal subpart of `length` bytes (Unicode's "substitution of maximal subparts", which
// Rust's from_utf8_lossy and Python's errors="replace" follow: each becomes one U+FFFD). kIncomplete:
// the last `length` bytes are a well-formed prefix that later bytes could still complete.
enum class Utf8Kind { kChar, kInvalid, kIncomplete };
struct Utf8Step {
  Utf8Kind kind;
  size_t length;
};
Utf8Step next_utf8(std::string_view text, size_t pos);

bool is_valid_utf8(std::string_view text);
// Every ill-formed maximal subpart (and a truncated sequence at the end) becomes U+FFFD.
std::string to_valid_utf8(std::string_view text);

// Decodes the character at `pos` of valid UTF-8 and advances `pos`.
char32_t decode_at(std::string_view text, size_t& pos);
// The character that ends just before `end` in valid UTF-8 (`end` > 0).
char32_t decode_before(std::string_view text, size_t end);
void append_utf8(std::string& out, char32_t c);

}  // namespace imp::text::unicode
