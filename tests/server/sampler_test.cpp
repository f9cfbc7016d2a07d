// The sampler's random draws (counter-based splitmix64) and its rule (runtime::sample_token): what the CUDA
// kernel launch_sample_tokens must reproduce token for token (tests/gpu/sampling_test.cpp compares the two).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/sampling_rule.h"

namespace imp::runtime {
namespace {

namespace rule = sampling_rule;

// u on a fine even grid over [0, 1): the frequencies of the chosen tokens are the rule's probabilities.
std::map<int32_t, double> frequencies(std::span<const float> logits, const SamplingOptions& options, int points = 20000) {
  std::map<int32_t, double> out;
  for (int i = 0; i < points; ++i) out[sample_token(logits, options, (i + 0.5) / points)] += 1.0 / points;
  return out;
}

TEST(SamplingRandom, IsSplitmix64ByDrawIndex) {
  // Vigna's splitmix64 seeded with 1234567: its first five outputs (the published reference sequence).
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                               4593380528125082431ull, 16408922859458223821ull};
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(rule::splitmix64(1234567, i), expected[i]) << "draw " << i;
  EXPECT_EQ(rule::splitmix64(0, 0), 0xE220A8397B1DCDAFull);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sampling_uniform(1234567, i), static_cast<double>(expected[i] >> 11) * 0x1p-53);
  }
}

TEST(SamplingRandom, UniformIsInTheUnitIntervalAndEvenlySpread) {
  std::vector<int> buckets(10, 0);
  for (uint64_t draw = 0; draw < 100000; ++draw) {
    const double u = sampling_uniform(42, draw);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++buckets[static_cast<size_t>(u * 10)];
  }
  for (int count : buckets) EXPECT_NEAR(count, 10000, 500);  // > 5 sigma
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(2, 0));
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(1, 1));
}

TEST(SamplingRandom, TheSamplerDrawsOneUniformPerToken) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(300);
  const SamplingOptions options{.temperature = 0.9f, .top_k = 40, .top_p = 0.9f, .min_p = 0.01f, .seed = 77};
  Sampler sampler(options);
  for (uint64_t draw = 0; draw < 50; ++draw) {
    for (float& x : logits) x = normal(rng);
    EXPECT_EQ(sampler.sample(logits), sample_token(logits, options, sampling_uniform(77, draw))) << "draw " << draw;
  }
  EXPECT_EQ(sampler.take_draw(), 50u);  // each sample() took one
  Sampler again(options);
  EXPECT_EQ(again.take_draw(), 0u);
  EXPECT_EQ(again.take_draw(), 1u);
}

TEST(SamplingRule, WeightsAreTheSoftmaxNumerators) {
  EXPECT_EQ(rule::weight_key(3.5f, 3.5f, rule::temperature_scale(0.7f)), rule::bits_of(1.0f));  // the top token
  EXPECT_EQ(rule::key_weight(rule::bits_of(1.0f)), uint64_t{1} << 40);
  for (const float t : {0.05f, 0.3f, 1.0f, 1.7f}) {
    const float scale = rule::temperature_scale(t);
    for (float d = 0.0f; d > -40.0f * t * 0.69f; d -= 0.0137f * t) {
      const float e = rule::float_from_bits(rule::weight_key(d, 0.0f, scale));
      const double want = std::exp(static_cast<double>(d) / t);
      // float rounding of the scale and of y = d * scale (|y| <= 40): about 3e-6 relative at the far end.
      ASSERT_NEAR(e, want, 5e-6 * want) << "T " << t << " d " << d;
    }
    // Below 2^-40 of the top token: weight 0, never a candidate.
    EXPECT_EQ(rule::key_weight(rule::weight_key(-41.0f * t * 0.6931472f, 0.0f, scale)), 0u);
  }
  EXPECT_EQ(rule::weight_key(std::nanf(""), 0.0f, 1.0f), 0u);
  EXPECT_EQ(rule::weight_key(-INFINITY, 0.0f, 1.0f), 0u);
  // A tiny temperature: the top token keeps weight 1, every other one 0 (no 0 * inf).
  const float tiny = rule::temperature_scale(1e-30f);
  EXPECT_EQ(rule::weight_key(2.0f, 2.0f, tiny), rule::bits_of(1.0f));
  EXPECT_EQ(rule::weight_key(1.9999f, 2.0f, tiny), 0u);
}

TEST(SamplingRule, TargetsAreExactIntegerArithmetic) {
  EXPECT_EQ(rule::draw_target(0.0, 1000), 0u);
  EXPECT_EQ(rule::draw_target(0.5, 1000), 500u);
  EXPECT_EQ(rule::draw_target(std::nextafter(1.0, 0.0), 1000), 999u);
  EXPECT_EQ(rule::draw_target(0.999, uint64_t{1} << 62), static_cast<uint64_t>(0.999 * 0x1p53) << 9);
  EXPECT_EQ(rule::top_p_target(0.5f, 1001), 501u);
  EXPECT_EQ(rule::top_p_target(1e-9f, 1000), 1u);  // at least one token
  EXPECT_EQ(rule::top_p_target(0.9999999f, 10), 10u);
  EXPECT_EQ(rule::candidate_floor_key(0.0f), rule::bits_of(0x1p-40f));
  EXPECT_EQ(rule::candidate_floor_key(0.25f), rule::bits_of(0.25f));
  EXPECT_EQ(rule::candidate_floor_key(2.0f), rule::bits_of(1.0f));
}

TEST(SamplingRule, GreedyIsTheArgmaxWithTiesToTheLowestIndex) {
  const std::vector<float> logits = {1.0f, 5.0f, -2.0f, 5.0f};
  EXPECT_EQ(sample_token(logits, {.temperature = 0.0f}, 0.99), 1);
  EXPECT_EQ(sample_token(logits, {.temperature = -1.0f}, 0.3), 1);
  EXPECT_EQ(sample_token(logits, {.temperature = 1.0f, .top_k = 1}, 0.999), 1);  // top-k 1: the first in order
  EXPECT_EQ(sample_token(logits, {.temperature = 1.0f, .top_p = 1e-6f}, 0.999), 1);
  EXPECT_EQ(sample_token(logits, {.temperature = 1e-30f}, 0.999), 3);  // the two tied tops share the draw
  EXPECT_EQ(sample_token(logits, {.temperature = 1e-30f}, 0.1), 1);
}

TEST(SamplingRule, ChoosesInProportionToTheWeights) {
  // Probabilities 1/6, 2/6, 3/6 at T = 1; 1/14, 4/14, 9/14 at T = 1/2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};
  auto f = frequencies(logits, {.temperature = 1.0f});
  EXPECT_NEAR(f[0], 1.0 / 6, 1e-3);
  EXPECT_NEAR(f[1], 2.0 / 6, 1e-3);
  EXPECT_NEAR(f[2], 3.0 / 6, 1e-3);
  f = frequencies(logits, {.temperature = 0.5f});
  EXPECT_NEAR(f[0], 1.0 / 14, 1e-3);
  EXPECT_NEAR(f[1], 4.0 / 14, 1e-3);
  EXPECT_NEAR(f[2], 9.0 / 14, 1e-3);
  // The inverse CDF runs over the kept tokens in index order: the smallest u picks the lowest index.
  EXPECT_EQ(sample_token(logits, {.temperature = 1.0f}, 0.0), 0);
  EXPECT_EQ(sample_token(logits, {.temperature = 1.0f}, std::nextafter(1.0, 0.0)), 2);
}

TEST(SamplingRule, FiltersTopKThenMinPThenTopP) {
  // Probabilities about .40 .25 .15 .10 .06 .04 (indices shuffled).
  const std::vector<float> p = {0.10f, 0.40f, 0.04f, 0.15f, 0.25f, 0.06f};
  std::vector<float> logits;
  for (float x : p) logits.push_back(std::log(x));
  auto chosen = [&](const SamplingOptions& o) {
    std::set<int32_t> out;
    for (const auto& [token, freq] : frequencies(logits, o, 5000)) out.insert(token);
    return out;
  };
  EXPECT_EQ(chosen({.temperature = 1.0f}), (std::set<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_k = 3}), (std::set<int32_t>{1, 4, 3}));
  EXPECT_EQ(chosen({.temperature = 1.0f, .min_p = 0.3f}), (std::set<int32_t>{1, 4, 3}));  // >= .12
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_p = 0.6f}), (std::set<int32_t>{1, 4}));     // .40 + .25 >= .6
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_p = 0.7f}), (std::set<int32_t>{1, 4, 3}));  // .65 < .7 <= .80
  // top-p renormalizes over what top-k and min-p kept: .40 / .65 >= .6.
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_k = 2, .top_p = 0.6f}), (std::set<int32_t>{1}));
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_p = 0.6f, .min_p = 0.5f}), (std::set<int32_t>{1}));
  EXPECT_EQ(chosen({.temperature = 1.0f, .min_p = 1.0f}), (std::set<int32_t>{1}));
  // Within the kept set the proportions stay: .40 : .25.
  auto f = frequencies(logits, {.temperature = 1.0f, .top_k = 2}, 20000);
  EXPECT_NEAR(f[1], 0.40 / 0.65, 1e-3);
}

TEST(SamplingRule, TiesAtACutKeepTheLowestIndices) {
  const std::vector<float> logits(7, 0.25f);
  auto chosen = [&](const SamplingOptions& o) {
    std::set<int32_t> out;
    for (const auto& [token, freq] : frequencies(logits, o, 7000)) out.insert(token);
    return out;
  };
  EXPECT_EQ(chosen({.temperature = 1.0f}).size(), 7u);
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_k = 3}), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_p = 0.3f}), (std::set<int32_t>{0, 1, 2}));  // 3/7 >= .3 > 2/7
  EXPECT_EQ(chosen({.temperature = 1.0f, .top_k = 5, .top_p = 0.5f}), (std::set<int32_t>{0, 1, 2}));  // 3/5 >= .5
}

TEST(SamplingRule, NonFiniteLogitsFallBackToTheArgmax) {
  const std::vector<float> inf = {0.0f, INFINITY, 1.0f};
  EXPECT_EQ(sample_token(inf, {.temperature = 1.0f}, 0.5), 1);
  const std::vector<float> minus_inf = {-INFINITY, -INFINITY};
  EXPECT_EQ(sample_token(minus_inf, {.temperature = 1.0f}, 0.5), 0);
  const std::vector<float> some = {-INFINITY, 0.0f, -INFINITY};
  EXPECT_EQ(sample_token(some, {.temperature = 1.0f}, 0.99), 1);
}

// The rule against a plain transcription of its definition (full sort by (key desc, index asc), cuts, a linear
// inverse CDF in index order) on random rows and parameters: the optimized host path (nth_element, a sort only
// when top-p is on) must not change a single token.
TEST(SamplingRule, MatchesItsDefinitionOnRandomRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t vocab = 1 + rng() % 2000;
    std::vector<float> logits(vocab);
    for (float& x : logits) x = std::round(normal(rng) * 4.0f) / 4.0f;  // many exact ties
    const float temps[] = {0.05f, 0.5f, 1.0f, 2.0f};
    const SamplingOptions o{.temperature = temps[rng() % 4],
                            .top_k = static_cast<int64_t>(rng() % 3 == 0 ? 0 : rng() % 60),
                            .top_p = rng() % 2 ? 1.0f : static_cast<float>(unit(rng)),
                            .min_p = rng() % 2 ? 0.0f : static_cast<float>(unit(rng) * 0.3)};
    const double u = unit(rng);
    // The definition.
    const float m = *std::max_element(logits.begin(), logits.end());
    const float scale = rule::temperature_scale(o.temperature);
    std::vector<std::pair<uint32_t, int32_t>> order;  // (key, index)
    for (size_t i = 0; i < vocab; ++i) order.push_back({rule::weight_key(logits[i], m, scale), static_cast<int32_t>(i)});
    std::sort(order.begin(), order.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    size_t keep = 0;
    while (keep < order.size() && order[keep].first >= rule::candidate_floor_key(o.min_p)) ++keep;
    if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
    if (o.top_p < 1.0f) {
      uint64_t total = 0;
      for (size_t i = 0; i < keep; ++i) total += rule::key_weight(order[i].first);
      const uint64_t target = rule::top_p_target(o.top_p, total);
      uint64_t mass = 0;
      for (size_t i = 0; i < keep; ++i) {
        mass += rule::key_weight(order[i].first);
        if (mass >= target) {
          keep = i + 1;
          break;
        }
      }
    }
    std::vector<uint64_t> weight(vocab, 0);
    uint64_t total = 0;
    for (size_t i = 0; i < keep; ++i) total += weight[static_cast<size_t>(order[i].second)] = rule::key_weight(order[i].first);
    const uint64_t t = rule::draw_target(u, total);
    int32_t want = -1;
    uint64_t cum = 0;
    for (size_t i = 0; i < vocab && want < 0; ++i) {
      cum += weight[i];
      if (weight[i] > 0 && cum > t) want = static_cast<int32_t>(i);
    }
    ASSERT_EQ(sample_token(logits, o, u), want) << "trial " << trial;
  }
}

TEST(EngineSeam, ForwardSampledChoosesAsTheSampler) {
  auto engine = load_engine(IMP_SOURCE_DIR "/tests/fixtures/chat_tiny", {});
  const SamplingOptions options{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 5};
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const SequenceId a = engine->new_sequence(), b = engine->new_sequence();
  ForwardRequest plain{.sequence = a, .tokens = prompt};
  const std::vector<float> logits = engine->forward({&plain, 1}).front();
  ForwardRequest sampled{.sequence = b, .tokens = prompt, .sampling = TokenSampling{.options = options, .draw = 3}};
  const ForwardResult result = engine->forward_sampled({&sampled, 1}).front();
  EXPECT_TRUE(result.logits.empty());
  EXPECT_EQ(result.token, sample_token(logits, options, sampling_uniform(5, 3)));
  EXPECT_EQ(engine->sequence_length(b), 4);

  ForwardRequest penalized{.sequence = b, .tokens = prompt,
                           .sampling = TokenSampling{.options = {.temperature = 1.0f, .presence_penalty = 1.0f}}};
  EXPECT_THROW(engine->forward_sampled({&penalized, 1}), Error);
}

}  // namespace
}  // namespace imp::runtime
