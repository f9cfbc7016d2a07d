// The pre-tokenizer: `tokenizers`' Split(Regex, behavior Isolated) on PCRE2 with JIT. Every regex match
// is one piece and so is every stretch between matches.
//
// The pattern comes from tokenizer.json and is written for Oniguruma, whose Unicode data is newer than
// PCRE2's. translate_pattern() rewrites \p{L}, \p{N}, \p{M} (adding what PCRE2's tables lack) and
// \s, \S (Oniguruma's White_Space set; PCRE2 also counts U+180E) so PCRE2 splits exactly as `tokenizers`.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace imp::text {

// The PCRE2 form of an Oniguruma pre-tokenizer pattern; throws imp::Error on constructs that cannot
// be translated faithfully (\w, \b, nested or intersected classes, ...).
std::string translate_pattern(std::string_view pattern);

class PreTokenizer {
 public:
  // An empty pattern means no split: the whole text is one piece.
  explicit PreTokenizer(std::string_view pattern = {});
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Walks the pieces of one valid UTF-8 text. Not shared between threads; PreTokenizer itself is.
  class Pieces {
   public:
    Pieces(const PreTokenizer& owner, std::string_view text);
    ~Pieces();
    Pieces(const Pieces&) = delete;
    Pieces& operator=(const Pieces&) = delete;
    bool next(std::string_view& piece);

   private:
    const PreTokenizer& owner_;
    std::string_view text_;
    void* match_data_ = nullptr;
    size_t pos_ = 0;         // where the next search starts
    size_t gap_start_ = 0;   // end of the last match
    size_t match_start_ = 0;
    size_t match_end_ = 0;
    bool pending_match_ = false;
    bool done_ = false;
  };

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace imp::text
