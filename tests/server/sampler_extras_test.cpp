// The sampler's OpenAI extras: presence/frequency penalties and log-probabilities.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/sampler.h"

namespace imp::runtime {
namespace {

TEST(SamplerExtras, PenaltiesFollowOpenAIsFormula) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> generated = {2, 2, 2, 1};
  apply_penalties(logits, generated, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(logits[3], 1.0f);
}

TEST(SamplerExtras, GreedyWithPenaltiesAvoidsRepeats) {
  Sampler sampler({.temperature = 0.0f, .presence_penalty = 2.0f});
  const std::vector<float> logits = {0.0f, 3.0f, 2.0f};
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{}), 1);
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{1}), 2);
  Sampler plain({});
  EXPECT_EQ(plain.sample(logits, std::vector<int32_t>{1}), 1);  // no penalties: unchanged
}

TEST(SamplerExtras, LogprobsAreALogSoftmax) {
  const std::vector<float> logits = {0.0f, std::log(3.0f), 0.0f, -100.0f};
  const TokenLogprobs lp = token_logprobs(logits, 0, 3);
  EXPECT_NEAR(lp.chosen.logprob, std::log(1.0 / 5.0), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_NEAR(lp.top[0].logprob, std::log(3.0 / 5.0), 1e-5);
  EXPECT_EQ(lp.top[1].token, 0);  // ties: lowest index first
  EXPECT_EQ(lp.top[2].token, 2);
  EXPECT_TRUE(token_logprobs(logits, 3, 0).top.empty());
}

}  // namespace
}  // namespace imp::runtime
