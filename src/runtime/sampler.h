// Chooses the next token from a logits row: greedy by default, or seeded sampling with temperature,
// top-k, top-p and min-p.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace imp::runtime {

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  int32_t sample(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

// Index of the largest logit; the lowest index wins a tie.
int32_t argmax(std::span<const float> logits);

}  // namespace imp::runtime
