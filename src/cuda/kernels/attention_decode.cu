#include "cuda/kernels/attention_decode.h"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

#include <cuda_bf16.h>

namespace imp::cuda {
namespace {

constexpr int kMaxHeadDim = 512;

// One warp per (row, head).
__global__ void head_norm_rope_kernel(float* x, int head_stride, const uint16_t* weight, int items, int heads, int head_dim,
                                      int rotary_dim, const int32_t* positions, const float* inv_freq, float eps) {
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

template <bool Bf16>
__device__ __forceinline__ float load_cache(const void* base, size_t index) {
  if constexpr (Bf16) {
    return bf16_bits_to_float(static_cast<const uint16_t*>(base)[index]);
  } else {
    return static_cast<const float*>(base)[index];
  }
}

__device__ __forceinline__ size_t cache_index(const KvPages& c, int row, int token, int offset, int width) {
  const int page = c.page_table[row * c.max_pages + token / c.page_size];
  return (static_cast<size_t>(page) * c.page_size + token % c.page_size) * width + offset;
}

__global__ void kv_append_kernel(KvPages cache, const float* k, const float* v, const int32_t* positions, int width) {
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

// One block per (row, query head); a single pass with an online softmax. Lanes split the head dimension
// for the dot products; warps split the tokens and are merged at the end.
template <bool Bf16>
__global__ void attention_decode_kernel(KvPages cache, const float* q, const float* gate, int head_stride,
                                        const int32_t* positions,
                                        const int32_t* selected, const int32_t* selected_count, int max_selected,
                                        int heads, int kv_heads, int head_dim, float* out) {
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float warp_max[32], warp_sum_s[32];
  extern __shared__ float acc_s[];  // [warps, head_dim]
  const int row = blockIdx.y, head = blockIdx.x;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int kvh = head / (heads / kv_heads), width = kv_heads * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) q_s[i] = q[(static_cast<size_t>(row) * heads + head) * head_stride + i];
  __syncthreads();

  const int count = selected ? selected_count[row] : positions[row] + 1;
  float m = -FLT_MAX, l = 0.0f;
  float acc[kMaxHeadDim / kWarp];
  const int per_lane = (head_dim + kWarp - 1) / kWarp;
  for (int d = 0; d < per_lane; ++d) acc[d] = 0.0f;
  for (int n = warp; n < count; n += warps) {
    const int token = selected ? selected[static_cast<size_t>(row) * max_selected + n] : n;
    const size_t base = cache_index(cache, row, token, kvh * head_dim, width);
    float dot = 0.0f;
    for (int d = 0; d < per_lane; ++d) {
      const int i = lane + d * kWarp;
      if (i < head_dim) dot += q_s[i] * load_cache<Bf16>(cache.keys, base + i);
    }
    const float score = warp_sum(dot) * scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), p = expf(score - m_new);
    l = l * correction + p;
    for (int d = 0; d < per_lane; ++d) {
      const int i = lane + d * kWarp;
      acc[d] = acc[d] * correction + (i < head_dim ? p * load_cache<Bf16>(cache.values, base + i) : 0.0f);
    }
    m = m_new;
  }
  // Merge the warps: rescale each to the block maximum.
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  float block_max = -FLT_MAX;
  for (int w = 0; w < warps; ++w) block_max = fmaxf(block_max, warp_max[w]);
  const float factor = m == -FLT_MAX ? 0.0f : expf(m - block_max);
  if (lane == 0) warp_sum_s[warp] = l * factor;
  for (int d = 0; d < per_lane; ++d) {
    const int i = lane + d * kWarp;
    if (i < head_dim) acc_s[warp * head_dim + i] = acc[d] * factor;
  }
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += warp_sum_s[w];
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += acc_s[w * head_dim + i];
    const float g = gate[(static_cast<size_t>(row) * heads + head) * head_stride + i];
    out[(static_cast<size_t>(row) * heads + head) * head_dim + i] = sum / total * (1.0f / (1.0f + expf(-g)));
  }
}

}  // namespace

void launch_head_norm_rope(float* x, int32_t head_stride, const uint16_t* weight, int32_t rows, int32_t heads, int32_t head_dim,
                           int32_t rotary_dim, const int32_t* positions, const float* inv_freq, float eps,
                           cudaStream_t stream) {
  constexpr int kWarps = 8;
  const int items = rows * heads;
  head_norm_rope_kernel<<<(items + kWarps - 1) / kWarps, kWarps * kWarp, 0, stream>>>(x, head_stride, weight, items, heads, head_dim,
                                                                                       rotary_dim, positions, inv_freq, eps);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_kv_append(const KvPages& cache, const float* k, const float* v, const int32_t* positions, int32_t rows,
                      int32_t kv_width, cudaStream_t stream) {
  kv_append_kernel<<<dim3((kv_width + 255) / 256, rows), 256, 0, stream>>>(cache, k, v, positions, kv_width);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_attention_decode(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                             const int32_t* positions,
                             const int32_t* selected, const int32_t* selected_count, int32_t max_selected,
                             int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim, float* out,
                             cudaStream_t stream) {
  if (head_dim > kMaxHeadDim || heads % kv_heads != 0) throw_invalid_launch("attention decode: head_dim above 512 or heads not a multiple of kv heads");
  constexpr int kWarps = 8;
  const size_t shared = static_cast<size_t>(kWarps) * head_dim * sizeof(float);
  const dim3 grid(heads, rows);
  if (cache.bf16) {
    attention_decode_kernel<true><<<grid, kWarps * kWarp, shared, stream>>>(cache, q, gate, head_stride, positions, selected, selected_count,
                                                                             max_selected, heads, kv_heads, head_dim, out);
  } else {
    attention_decode_kernel<false><<<grid, kWarps * kWarp, shared, stream>>>(cache, q, gate, head_stride, positions, selected, selected_count,
                                                                              max_selected, heads, kv_heads, head_dim, out);
  }
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
