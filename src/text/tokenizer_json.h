// Reading tokenizer.json fast: the model's vocab and merges (hundreds of thousands of entries) are
// streamed into flat vectors; everything else becomes an ordinary JSON tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace imp::text {

struct TokenizerJson {
  nlohmann::json root;  // the file without model.vocab and model.merges
  bool has_vocab = false;
  bool has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;  // in file order; a non-integer id is -1
  // Each merge as written: one string "a b" (second empty, is_pair false) or a pair [a, b].
  struct Merge {
    std::string first;
    std::string second;
    bool is_pair;
  };
  std::vector<Merge> merges;
};

// Throws imp::Error naming `origin` when the text is not valid JSON or vocab/merges are malformed.
TokenizerJson parse_tokenizer_json(std::string_view text, std::string_view origin);

}  // namespace imp::text
