// Added tokens (special and not), found in the text before pre-tokenization with `tokenizers`'
// semantics: leftmost-longest matching over all contents; single_word drops a match touching a word
// character (Rust regex \w) on either side, lstrip/rstrip widen the match over the whitespace around
// it; tokens with normalized=false are matched in the raw text, the others (by their normalized
// content) in each normalized stretch between the first ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace imp::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  // A stretch of the text: an added token (id >= 0) or text left for the model (id < 0).
  struct Split {
    size_t begin;
    size_t end;
    int32_t id;
  };

  AddedVocabulary() = default;
  // `tokens` carry their final ids and flags. `patterns` lists, in `tokenizers`' order, the
  // (content, id) pairs to search, for the raw pass (normalized=false) or the normalized pass.
  struct Pattern {
    std::string text;
    int32_t id;
  };
  AddedVocabulary(const std::vector<AddedToken>& tokens, std::vector<Pattern> raw_patterns,
                  std::vector<Pattern> normalized_patterns);

  // Appends the splits of `text` (which cover it, possibly overlapping where rstrip swallowed the
  // start of the next match, as in `tokenizers`).
  void split(std::string_view text, bool normalized_pass, std::vector<Split>& out) const;
  bool empty(bool normalized_pass) const { return tries_[normalized_pass].nodes.size() <= 1; }

 private:
  struct Flags {
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t pattern = -1;  // index into Trie::ids when a pattern ends here
  };
  struct Trie {
    std::vector<Node> nodes{1};
    std::vector<int32_t> ids;
    bool first_byte[256] = {};
  };
  struct Match {
    size_t begin;
    size_t end;
    int32_t id;
  };

  static void add(Trie& trie, const Pattern& pattern);
  static bool find(const Trie& trie, std::string_view text, size_t from, Match& match);
  const Flags& flags(int32_t id) const;

  Trie tries_[2];
  std::vector<int32_t> flag_ids_;  // sorted ids with non-default flags
  std::vector<Flags> flags_;
};

}  // namespace imp::text
