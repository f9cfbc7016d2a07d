// One warp's dot products of one BF16 weight row with Rows fp32 vectors, for the decode GEMV kernels. Each
// lane takes 8 weights (16 bytes) at a time, coalesced across the warp, and issues kGemvBatch loads before it
// uses any of them. load_x(r, c, xv) supplies x[r, c .. c + 8), so fused
// kernels can compute their input on the fly. Returns the warp-summed dots in every lane.
#pragma once

#include <cstdint>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {

constexpr int kGemvBatch = 4;
constexpr int kGemvThreads = 128;  // 4 rows (warps) per block
constexpr unsigned gemv_blocks(int rows) { return static_cast<unsigned>((rows + kGemvThreads / kWarp - 1) / (kGemvThreads / kWarp)); }
// Measured on the H200 (graph of back-to-back launches, build/exp A/B of 8 load schemes): 4 loads in flight per
// lane through the read-only path in 128-thread blocks was the best or within 3% of it on every decode shape
// (in_proj 16480x2560: 3.55 TB/s; LM head 4.50 TB/s); 8 loads per lane, streaming (.cs) loads or 512-thread
// blocks were up to 15% slower on the mid-size projections.

// PDL: the first batch of weight loads goes out before pdl_wait(); load_x runs after it (see device_math.cuh).
template <int Rows, class LoadX>
__device__ __forceinline__ void bf16_row_dots(const uint16_t* row, int k, LoadX load_x, float (&acc)[Rows]) {
  const int lane = threadIdx.x % kWarp;
  const uint4* w = reinterpret_cast<const uint4*>(row);
  const int chunks = k / 8;
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0f;
  uint4 packed[kGemvBatch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int b = 0; b < kGemvBatch; ++b) {
      if (c0 + b * kWarp < chunks) packed[b] = __ldg(w + c0 + b * kWarp);
    }
  };
  load_batch(lane);
  pdl_wait();
  for (int c0 = lane; c0 < chunks; c0 += kWarp * kGemvBatch) {
    if (c0 != lane) load_batch(c0);
#pragma unroll
    for (int b = 0; b < kGemvBatch; ++b) {
      const int c = 8 * (c0 + b * kWarp);
      if (c >= k) break;
      const uint32_t words[4] = {packed[b].x, packed[b].y, packed[b].z, packed[b].w};
      float wf[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wf[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
        wf[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        float xv[8];
        load_x(r, c, xv);
        acc[r] += wf[0] * xv[0] + wf[1] * xv[1] + wf[2] * xv[2] + wf[3] * xv[3] + wf[4] * xv[4] + wf[5] * xv[5] +
                  wf[6] * xv[6] + wf[7] * xv[7];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = warp_sum(acc[r]);
}

// load_x for plain fp32 rows [Rows, k].
struct PlainX {
  const float* x;
  int k;
  __device__ __forceinline__ void operator()(int r, int c, float (&xv)[8]) const {
    const float4 x0 = *reinterpret_cast<const float4*>(x + static_cast<size_t>(r) * k + c);
    const float4 x1 = *reinterpret_cast<const float4*>(x + static_cast<size_t>(r) * k + c + 4);
    xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w, xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
  }
};

// x[i] = silu(gate[i]) * up[i], computed where the GEMV reads it.
struct SwigluX {
  const float* gate;
  const float* up;
  __device__ __forceinline__ void operator()(int, int c, float (&xv)[8]) const {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float g = gate[c + i];
      xv[i] = g * sigmoidf(g) * up[c + i];
    }
  }
};

}  // namespace imp::cuda
