#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "runtime/sampling_rule.h"

namespace imp::runtime {

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence, float frequency) {
  std::vector<int32_t> seen;  // tokens in first-seen order, so each gets the presence penalty once
  std::vector<uint32_t> counts(logits.size(), 0);
  for (int32_t token : generated) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    if (counts[token]++ == 0) seen.push_back(token);
  }
  for (int32_t token : seen) logits[token] -= static_cast<float>(counts[token]) * frequency + presence;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const float log_sum = static_cast<float>(std::log(sum)) + max_logit;
  TokenLogprobs out;
  out.chosen = {token, logits[static_cast<size_t>(token)] - log_sum};
  const size_t k = std::min(logits.size(), static_cast<size_t>(std::max(top, 0)));
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  for (size_t i = 0; i < k; ++i) out.top.push_back({order[i], logits[order[i]] - log_sum});
  return out;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> generated) {
  if (!has_penalties() || generated.empty()) return sample(logits);
  std::vector<float> penalized(logits.begin(), logits.end());
  apply_penalties(penalized, generated, options_.presence_penalty, options_.frequency_penalty);
  return sample(penalized);
}

// The sampling rule. Every step below is exact integer arithmetic or an IEEE operation that rounds the same on
// the host and in the CUDA kernel (sampling_rule.h), so launch_sample_tokens (cuda/kernels/sampling.cu, which
// reaches the same sets with radix selects instead of sorting) chooses the same token for the same u:
//  0. temperature <= 0 (or NaN): the argmax, the lowest index on a tie.
//  1. m = max logit; each token's e = 2^((l - m) * log2(e) / T) as weight_key computes it (exactly 1 for the
//     top token, 0 below 2^-40), its key = the bits of e and its integer weight w = floor(e * 2^40).
//  2. Order: key descending, then index ascending.
//  3. Candidates: e >= max(min_p, 2^-40) (min-p is relative to the top token's e = 1).
//  4. top-k > 0: the first k candidates in that order.
//  5. top-p < 1: of those, the shortest prefix in that order whose w-sum reaches
//     P = top_p_target(top_p, S) = clamp(ceil(top_p * S), 1, S), S their w-sum.
//  6. The draw: S = w-sum of the kept tokens, t = draw_target(u, S) = floor(floor(u * 2^53) * S / 2^53); the
//     token is the kept one of lowest index whose running w-sum over the kept tokens, in index order, exceeds t.
//     Each kept token is chosen with probability w / S (up to u's 2^-53 resolution).
//  No candidate at all (a NaN or infinite logit): the argmax.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, double u) {
  namespace rule = sampling_rule;
  if (!(options.temperature > 0.0f) || logits.empty()) return argmax(logits);
  if (static_cast<int64_t>(logits.size()) > rule::kMaxVocab) fail("sampling supports vocabularies up to {} tokens", rule::kMaxVocab);
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  const float scale = rule::temperature_scale(options.temperature);
  const uint32_t floor_key = rule::candidate_floor_key(options.min_p);
  struct Candidate {
    uint32_t key;
    int32_t index;
  };
  std::vector<Candidate> kept;
  for (size_t i = 0; i < logits.size(); ++i) {
    const uint32_t key = rule::weight_key(logits[i], max_logit, scale);
    if (key >= floor_key) kept.push_back({key, static_cast<int32_t>(i)});
  }
  if (kept.empty()) return argmax(logits);
  auto before = [](const Candidate& a, const Candidate& b) { return a.key != b.key ? a.key > b.key : a.index < b.index; };
  if (options.top_k > 0 && static_cast<size_t>(options.top_k) < kept.size()) {
    const auto kth = kept.begin() + static_cast<std::ptrdiff_t>(options.top_k);
    std::nth_element(kept.begin(), kth, kept.end(), before);
    kept.erase(kth, kept.end());
  }
  if (options.top_p < 1.0f) {
    std::sort(kept.begin(), kept.end(), before);
    uint64_t total = 0;
    for (const Candidate& c : kept) total += rule::key_weight(c.key);
    const uint64_t target = rule::top_p_target(options.top_p, total);
    uint64_t mass = 0;
    size_t keep = 0;
    while (mass < target) mass += rule::key_weight(kept[keep++].key);
    kept.resize(keep);
  }
  std::sort(kept.begin(), kept.end(), [](const Candidate& a, const Candidate& b) { return a.index < b.index; });
  uint64_t total = 0;
  for (const Candidate& c : kept) total += rule::key_weight(c.key);
  const uint64_t target = rule::draw_target(u, total);
  uint64_t mass = 0;
  for (const Candidate& c : kept) {
    mass += rule::key_weight(c.key);
    if (mass > target) return c.index;
  }
  return kept.back().index;  // unreachable: target < total
}

double sampling_uniform(uint64_t seed, uint64_t draw) { return sampling_rule::uniform(seed, draw); }

int32_t Sampler::sample(std::span<const float> logits) {
  return sample_token(logits, options_, sampling_uniform(options_.seed, draws_++));
}

}  // namespace imp::runtime
