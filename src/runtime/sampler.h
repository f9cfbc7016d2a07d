// Chooses the next token from a logits row: greedy by default, or seeded sampling with temperature,
// top-k, top-p and min-p. OpenAI-style presence and frequency penalties (applied to the logits of tokens
// already generated, before greedy or sampled choice) and log-probabilities for the server.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace imp::runtime {

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
  float presence_penalty = 0.0f;   // subtracted once from each token already generated
  float frequency_penalty = 0.0f;  // subtracted per occurrence of each token already generated
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  int32_t sample(std::span<const float> logits);
  // With penalties over `generated` (the tokens this sequence produced so far); equals sample(logits) when
  // both penalties are 0.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> generated);

  bool has_penalties() const { return options_.presence_penalty != 0.0f || options_.frequency_penalty != 0.0f; }

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

// Index of the largest logit; the lowest index wins a tie.
int32_t argmax(std::span<const float> logits);

// OpenAI's penalties: logit[t] -= count(t) * frequency + (count(t) > 0) * presence.
void apply_penalties(std::span<float> logits, std::span<const int32_t> generated, float presence, float frequency);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// The model's log-probability of `token` (log-softmax of the raw logits) and the `top` most likely tokens
// (ties to the lowest index), as OpenAI's logprobs/top_logprobs report them.
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace imp::runtime
