// One QSA block key by one warp (cpu::qsa block keys): the mean of the block's `ratio` raw indexer keys, the
// (1 + w) key norm, RoPE at the block's first token. Shared by the prefill block-key kernel (qsa.cu) and the
// decode index prep in the score kernel (qsa.cu), so both write bit-identical keys.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {

__device__ __forceinline__ void write_block_key(const float* raw_keys, int b, int ratio, int dim, const uint16_t* k_norm,
                                                float eps, int rotary_dim, const float* inv_freq, float* block_keys,
                                                int lane) {
  float* key = block_keys + static_cast<size_t>(b) * dim;
  float s = 0.0f;
  for (int i = lane; i < dim; i += kWarp) {
    float sum = 0.0f;
    for (int r = 0; r < ratio; ++r) sum += raw_keys[(static_cast<size_t>(b) * ratio + r) * dim + i];
    key[i] = sum / static_cast<float>(ratio);
    s += key[i] * key[i];
  }
  const float inv = rsqrtf(warp_sum(s) / static_cast<float>(dim) + eps);
  for (int i = lane; i < dim; i += kWarp) key[i] = key[i] * inv * (1.0f + bf16_bits_to_float(k_norm[i]));
  __syncwarp();
  rope_rotate_warp(key, rotary_dim, static_cast<float>(b * ratio), inv_freq, lane);
}

}  // namespace imp::cuda
