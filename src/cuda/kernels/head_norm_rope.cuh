// One head's (1 + w) RMSNorm and RoPE by one warp, shared by the decode prep kernel (attention_decode_prep.cu) and
// the QSA decode index prep in the score kernel (qsa.cu), so both give the bits of head_norm_rope_kernel.
#pragma once

#include <cstdint>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/kv_pages.cuh"

namespace imp::cuda {

// A lane's elements lane, lane + 32, ... of a head (up to attention::kMaxHeadDim), loaded in one round trip: a loop of
// one load and one store per step waits for every load in turn.
constexpr int kHeadLanes = attention::kMaxHeadDim / kWarp;
template <class T>
__device__ __forceinline__ void load_head_lanes(const T* in, int head_dim, int lane, T (&v)[kHeadLanes]) {
#pragma unroll
  for (int j = 0; j < kHeadLanes; ++j) {
    if (lane + j * kWarp < head_dim) v[j] = in[lane + j * kWarp];
  }
}

// One head's (1 + w) RMSNorm and RoPE into `out` (the warp's shared buffer); gain is scratch. The arithmetic
// and order of head_norm_rope_kernel, so both give the same bits; the input and weight loads go out together.
__device__ __forceinline__ void norm_rope_head(const float* in, const uint16_t* weight, int head_dim, int rotary_dim,
                                               float position, const float* inv_freq, float eps, float* out,
                                               float* gain, int lane) {
  float v[kHeadLanes];
  uint16_t w[kHeadLanes];
  load_head_lanes(in, head_dim, lane, v);
  load_head_lanes(weight, head_dim, lane, w);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kHeadLanes; ++j) {
    const int i = lane + j * kWarp;
    if (i >= head_dim) break;
    gain[i] = 1.0f + bf16_bits_to_float(w[j]);
    out[i] = v[j];
    s += v[j] * v[j];
  }
  const float inv = rsqrtf(warp_sum(s) / static_cast<float>(head_dim) + eps);
  for (int i = lane; i < head_dim; i += kWarp) out[i] = out[i] * inv * gain[i];
  __syncwarp();
  rope_rotate_warp(out, rotary_dim, position, inv_freq, lane);
  __syncwarp();
}

}  // namespace imp::cuda
