// Internal: the parts of a loaded Tokenizer, shared by the loader (tokenizer_loader.cpp) and the
// encode/decode paths (tokenizer.cpp).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/added_vocabulary.h"
#include "text/bpe.h"
#include "text/normalizer.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

namespace imp::text {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::optional<BpeModel> model;
  AddedVocabulary added;
  std::vector<AddedToken> added_tokens;  // final ids and flags, one per id, in file order

  // Per id (index); unknown ids have known = 0.
  std::vector<std::string> bytes;  // what decoding the id contributes
  std::vector<uint8_t> known;
  std::vector<uint8_t> special;
  // Token spellings that are not byte-level text (added tokens, odd model tokens) by id and content.
  std::unordered_map<int32_t, std::string> spelled;
  std::unordered_map<std::string, int32_t> by_spelling;

  TokenizerConfig config;
};

}  // namespace imp::text
