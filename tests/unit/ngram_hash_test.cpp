// The PLE n-gram hash against the constants of the released checkpoint (spec §3.9) and the EOS rules.
#include <gtest/gtest.h>

#include "model/ngram_hash.h"

namespace imp::model {
namespace {

ModelConfig released_config() {
  ModelConfig c;
  c.vocab_size = 248320;
  c.hidden_size = 2560;
  c.ple_embed_dim = 2560;
  c.ngram_size = 3;
  c.heads_per_ngram = 8;
  c.ngram_vocab_size_base = 20000000;
  c.make_ngram_vocab_size_divisible_by = 128;
  c.seed = 1234;
  c.eos_token_ids = {248044};
  c.ple_layer_ids = {2};
  return c;
}

TEST(NgramHash, ReleasedConstants) {
  const NgramHash hash(released_config(), 0);
  EXPECT_EQ(hash.multipliers(), (std::vector<int64_t>{23703573157769, 20109073645365, 8052911324071}));
  EXPECT_EQ(hash.vocab_sizes(),
            (std::vector<int64_t>{20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
                                  20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171}));
  EXPECT_EQ(hash.offsets(),
            (std::vector<int64_t>{0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228, 140000297,
                                  160000374, 180000455, 200000548, 220000655, 240000802, 260000955, 280001114,
                                  300001275}));
  EXPECT_EQ(hash.total_rows(), 320001446);
  EXPECT_EQ(hash.padded_rows(), 320001536);
}

TEST(NgramHash, SecondPleBlockTakesTheNextPrimesAndSeed) {
  const NgramHash first(released_config(), 0), second(released_config(), 1);
  EXPECT_GT(second.vocab_sizes().front(), first.vocab_sizes().back());
  EXPECT_NE(second.multipliers(), first.multipliers());
}

// Row ids from first principles for one position: key = XOR of shifted ids times multipliers.
int64_t expected_row(const NgramHash& hash, int head, const std::vector<int64_t>& shifted) {
  const int order = head < 8 ? 2 : 3;
  uint64_t key = 0;
  for (int s = 0; s < order; ++s) key ^= static_cast<uint64_t>(shifted[s]) * static_cast<uint64_t>(hash.multipliers()[s]);
  return static_cast<int64_t>(key % static_cast<uint64_t>(hash.vocab_sizes()[head])) + hash.offsets()[head];
}

TEST(NgramHash, ShiftsNeverCrossAnEos) {
  const NgramHash hash(released_config(), 0);
  const int64_t E = hash.eos();
  std::vector<int64_t> context = hash.initial_context();
  EXPECT_EQ(context, (std::vector<int64_t>{E, E}));
  const std::vector<int32_t> tokens = {5, static_cast<int32_t>(E), 7, 8, 9};
  std::vector<int64_t> ids(tokens.size() * 16);
  hash.row_ids(context, tokens, ids);
  // Expected (current, previous, one before) for each token, as transformers computes them: an EOS still
  // sees the tokens of its own segment before it.
  const std::vector<std::vector<int64_t>> shifted = {{5, E, E}, {E, 5, E}, {7, E, E}, {8, 7, E}, {9, 8, 7}};
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int h = 0; h < 16; ++h) EXPECT_EQ(ids[t * 16 + h], expected_row(hash, h, shifted[t])) << "token " << t << " head " << h;
  }
  EXPECT_EQ(context, (std::vector<int64_t>{8, 9}));
}

TEST(NgramHash, ChunksCarryTheRawContext) {
  const NgramHash hash(released_config(), 0);
  const std::vector<int32_t> tokens = {11, 12, 248044, 13, 14, 15, 16};
  std::vector<int64_t> whole_ctx = hash.initial_context(), whole(tokens.size() * 16);
  hash.row_ids(whole_ctx, tokens, whole);
  std::vector<int64_t> ctx = hash.initial_context(), pieces;
  size_t begin = 0;
  for (size_t split : {1u, 2u, 1u, 3u}) {
    std::vector<int64_t> part(split * 16);
    hash.row_ids(ctx, std::span(tokens).subspan(begin, split), part);
    pieces.insert(pieces.end(), part.begin(), part.end());
    begin += split;
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(ctx, whole_ctx);
}

}  // namespace
}  // namespace imp::model
