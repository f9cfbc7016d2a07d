#include "cpu/blocks.h"

namespace imp::cpu {

void hyper_connection_read(const model::ModelConfig& config, const model::HyperConnectionWeights& w,
                           const float* stream, int64_t tokens, float* x, float* inject) {
  const int64_t d = config.hidden_size, s_count = config.hc_count, width = config.stream_width();
  const int64_t rank = config.hc_lowrank;
  const float inv_s = 1.0f / static_cast<float>(s_count);

  std::vector<float> normed(static_cast<size_t>(tokens * width));
  rms_norm(stream, to_f32(w.norm), tokens, width, d, config.rms_norm_eps, normed.data());

  std::vector<float> low(static_cast<size_t>(tokens * rank));
  linear(w.down, normed.data(), tokens, low.data());
  for (float& v : low) v = silu(v / static_cast<float>(s_count));
  std::vector<float> mix(static_cast<size_t>(tokens * width));
  linear(w.up, low.data(), tokens, mix.data());

  // x = mean over streams of sigmoid(mix) * normed.
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < d; ++j) {
      float sum = 0.0f;
      for (int64_t s = 0; s < s_count; ++s) {
        const int64_t i = t * width + s * d + j;
        sum += sigmoid(mix[static_cast<size_t>(i)]) * normed[static_cast<size_t>(i)];
      }
      x[t * d + j] = sum * inv_s;
    }
  }
  if (inject) {
    linear(w.inject, normed.data(), tokens, inject);
    for (int64_t i = 0; i < tokens * s_count; ++i) inject[i] = 2.0f * sigmoid(inject[i] * inv_s);
  }
}

void hyper_connection_write(const model::ModelConfig& config, const float* y, const float* inject, int64_t tokens,
                            float* stream) {
  const int64_t d = config.hidden_size, s_count = config.hc_count;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < s_count; ++s) {
      const float weight = inject[t * s_count + s];
      float* row = stream + (t * s_count + s) * d;
      for (int64_t j = 0; j < d; ++j) row[j] += weight * y[t * d + j];
    }
  }
}

}  // namespace imp::cpu
