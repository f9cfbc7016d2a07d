#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

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

int32_t Sampler::sample(std::span<const float> logits) {
  if (options_.temperature <= 0.0f) return argmax(logits);
  const size_t n = logits.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  size_t keep = n;
  if (options_.top_k > 0) keep = std::min(keep, static_cast<size_t>(options_.top_k));

  std::vector<double> probs(keep);
  const double max_logit = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) sum += probs[i] = std::exp((logits[order[i]] - max_logit) / options_.temperature);
  for (double& p : probs) p /= sum;
  // min-p: drop tokens below min_p times the top probability.
  if (options_.min_p > 0.0f) {
    while (keep > 1 && probs[keep - 1] < options_.min_p * probs[0]) --keep;
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i];
      if (mass >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<size_t> pick(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep));
  return order[pick(rng_)];
}

}  // namespace imp::runtime
