#include "cuda/kernels/attention_decode.h"

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/kv_pages.cuh"
#include "cuda/kernels/head_norm_rope.cuh"

#include <cuda_bf16.h>

namespace imp::cuda {
namespace {

using namespace attention;

// One warp per (row, head).
__global__ void head_norm_rope_kernel(float* x, int head_stride, const uint16_t* weight, int items, int heads, int head_dim,
                                      int rotary_dim, const int32_t* positions, const float* inv_freq, float eps) {
  pdl_begin();
  const int lane = threadIdx.x % kWarp;
  const int item = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;  // row * heads + head
  if (item >= items) return;
  const int row = item / heads;
  float* h = x + static_cast<size_t>(item) * head_stride;
  float s = 0.0f;
  for (int i = lane; i < head_dim; i += kWarp) s += h[i] * h[i];
  const float inv = rsqrtf(warp_sum(s) / static_cast<float>(head_dim) + eps);
  for (int i = lane; i < head_dim; i += kWarp) h[i] = h[i] * inv * (1.0f + bf16_bits_to_float(weight[i]));
  __syncwarp();
  rope_rotate_warp(h, rotary_dim, static_cast<float>(positions[row]), inv_freq, lane);
}

__global__ void kv_append_kernel(KvPages cache, const float* k, const float* v, const int32_t* positions, int width) {
  pdl_begin();
  const int row = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= width) return;
  const size_t at = cache_index(cache, row, positions[row], i, width);
  const float kv[2] = {k[static_cast<size_t>(row) * width + i], v[static_cast<size_t>(row) * width + i]};
  void* bases[2] = {cache.keys, cache.values};
  for (int t = 0; t < 2; ++t) {
    if (cache.bf16) {
      const __nv_bfloat16 b = __float2bfloat16_rn(kv[t]);
      static_cast<uint16_t*>(bases[t])[at] = *reinterpret_cast<const uint16_t*>(&b);
    } else {
      static_cast<float*>(bases[t])[at] = kv[t];
    }
  }
}

// Decode prep: one warp per task, in order the query heads, the key heads (+ K/V append).
constexpr int kPrepWarps = 8;

__global__ void __launch_bounds__(kPrepWarps * kWarp) attention_decode_prep_kernel(DecodePrep p) {
  pdl_begin();
  __shared__ float buffer[kPrepWarps][kMaxHeadDim], gain[kPrepWarps][kMaxHeadDim];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int position = p.positions[0], hd = p.head_dim;
  float* out = buffer[warp];
  int task = static_cast<int>(blockIdx.x) * kPrepWarps + warp;
  if (task < p.heads) {
    float* h = p.q_gate + static_cast<size_t>(task) * 2 * hd;
    norm_rope_head(h, p.q_norm, hd, p.rotary_dim, static_cast<float>(position), p.inv_freq, p.eps, out, gain[warp], lane);
    for (int i = lane; i < hd; i += kWarp) h[i] = out[i];
    return;
  }
  task -= p.heads;
  if (task >= p.kv_heads) return;
  const int width = p.kv_heads * hd, offset = task * hd;
  float values[kHeadLanes];
  load_head_lanes(p.v + offset, hd, lane, values);
  norm_rope_head(p.k + offset, p.k_norm, hd, p.rotary_dim, static_cast<float>(position), p.inv_freq, p.eps, out,
                 gain[warp], lane);
  const size_t at = cache_index(p.cache, 0, position, offset, width);
#pragma unroll
  for (int j = 0; j < kHeadLanes; ++j) {
    const int i = lane + j * kWarp;
    if (i >= hd) break;
    const float value = values[j];
    if (p.cache.bf16) {
      const __nv_bfloat16 kb = __float2bfloat16_rn(out[i]), vb = __float2bfloat16_rn(value);
      static_cast<uint16_t*>(p.cache.keys)[at + i] = *reinterpret_cast<const uint16_t*>(&kb);
      static_cast<uint16_t*>(p.cache.values)[at + i] = *reinterpret_cast<const uint16_t*>(&vb);
    } else {
      static_cast<float*>(p.cache.keys)[at + i] = out[i];
      static_cast<float*>(p.cache.values)[at + i] = value;
    }
  }
}

}  // namespace

void launch_head_norm_rope(float* x, int32_t head_stride, const uint16_t* weight, int32_t rows, int32_t heads, int32_t head_dim,
                           int32_t rotary_dim, const int32_t* positions, const float* inv_freq, float eps,
                           cudaStream_t stream) {
  constexpr int kWarps = 8;
  const int items = rows * heads;
  launch_kernel(head_norm_rope_kernel, (items + kWarps - 1) / kWarps, kWarps * kWarp, 0, stream, 1,
                x, head_stride, weight, items, heads, head_dim,
                                                                                       rotary_dim, positions, inv_freq, eps);
}

void launch_kv_append(const KvPages& cache, const float* k, const float* v, const int32_t* positions, int32_t rows,
                      int32_t kv_width, cudaStream_t stream) {
  launch_kernel(kv_append_kernel, dim3((kv_width + 255) / 256, rows), 256, 0, stream, 1,
                cache, k, v, positions, kv_width);
}

void launch_attention_decode_prep(const DecodePrep& p, cudaStream_t stream) {
  const int tasks = p.heads + p.kv_heads;
  if (tasks == 0) return;
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim || p.rotary_dim > p.head_dim) {
    throw_invalid_launch("attention decode prep: head_dim outside [1, 512] or rotary_dim above it");
  }
  launch_kernel(attention_decode_prep_kernel, (tasks + kPrepWarps - 1) / kPrepWarps, kPrepWarps * kWarp, 0, stream, 1, p);
}

}  // namespace imp::cuda
