// The device n-gram hash against model::NgramHash::row_ids: token runs in chunks of different sizes (decode
// steps of 1, prefill chunks), with EOS ids frequent so shifts stop at document boundaries, at the released
// constants (n = 3, 8 heads per n-gram) and at n = 4; row ids and the advanced context must be identical.
#include <gtest/gtest.h>

#include <random>
#include <span>
#include <vector>

#include "cuda/device_model.h"
#include "cuda/kernels/ngram_hash.h"
#include "cuda/memory/device_buffer.h"
#include "gpu_test_util.h"
#include "model/ngram_hash.h"

namespace imp::cuda {
namespace {

using namespace testing_support;

void run_case(int ngram, int heads_per_ngram, int64_t vocab_base) {
  model::ModelConfig config;
  config.vocab_size = 248320;
  config.ple_layer_ids = {2};
  config.ngram_size = ngram;
  config.heads_per_ngram = heads_per_ngram;
  config.ngram_vocab_size_base = vocab_base;
  config.eos_token_ids = {7};
  const model::NgramHash hash(config, 0);
  const NgramHashDevice device_hash = to_device(hash);
  std::vector<int64_t> context = hash.initial_context();
  DeviceBuffer<int64_t> d_context(context);
  std::uniform_int_distribution<int32_t> token(0, 12);  // EOS (7) about one token in 13
  std::uniform_int_distribution<int32_t> big(0, 248319);
  for (int count : {1, 1, 5, 17, 1, 64, 3, 200, 1}) {
    std::vector<int32_t> tokens(static_cast<size_t>(count));
    for (int32_t& t : tokens) t = rng()() % 3 == 0 ? big(rng()) : token(rng());
    std::vector<int64_t> want(static_cast<size_t>(count * hash.heads()));
    hash.row_ids(context, tokens, want);
    DeviceBuffer<int32_t> d_tokens(tokens);
    DeviceBuffer<int64_t> d_ids(want.size());
    launch_ngram_ids(device_hash, d_tokens.data(), count, d_context.data(), d_ids.data(), nullptr);
    ASSERT_EQ(d_ids.download(), want) << "chunk of " << count;
    ASSERT_EQ(d_context.download(), context) << "chunk of " << count;
  }
}

TEST(GpuNgramHash, MatchesHostAtReleasedConstants) { run_case(3, 8, 20000000); }
TEST(GpuNgramHash, MatchesHostWithFourGrams) { run_case(4, 4, 1000); }

}  // namespace
}  // namespace imp::cuda
