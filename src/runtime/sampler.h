// Chooses the next token from a logits row: greedy by default, or seeded sampling with temperature,
// top-k, top-p and min-p (sample_token's rule, which the CUDA sampling kernel follows bit for bit).
// OpenAI-style presence and frequency penalties (applied to the logits of tokens already generated, before
// greedy or sampled choice) and log-probabilities for the server.
#pragma once

#include <cstdint>
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

// The sampling rule (stated in full in sampler.cpp): the token that temperature, top-k, min-p and top-p
// choose from `logits` for the uniform draw u in [0, 1); the argmax when temperature <= 0 (u unused).
// Penalties are not applied here. The CUDA kernel launch_sample_tokens chooses the same token for the same u.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, double u);

// The u of draw `draw` of the stream `seed`: splitmix64's draw-th output, 53 bits (sampling_rule.h).
double sampling_uniform(uint64_t seed, uint64_t draw);

// One sequence's sampler: the i-th token it chooses (i from 0) uses sampling_uniform(seed, i), so a seed
// gives the same tokens on every backend and whether the host or the device applies the rule.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options) {}
  int32_t sample(std::span<const float> logits);
  // With penalties over `generated` (the tokens this sequence produced so far); equals sample(logits) when
  // both penalties are 0.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> generated);

  // Takes the next draw index without sampling here: for a backend that applies the rule itself
  // (Engine::forward_sampled). Every sample() takes one too, greedy or not.
  uint64_t take_draw() { return draws_++; }

  bool has_penalties() const { return options_.presence_penalty != 0.0f || options_.frequency_penalty != 0.0f; }

 private:
  SamplingOptions options_;
  uint64_t draws_ = 0;
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
