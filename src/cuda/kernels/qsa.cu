#include "cuda/kernels/qsa.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 1024;

// One warp per block key.
__global__ void qsa_block_keys_kernel(const float* raw_keys, int first_block, int last_block, int ratio, int dim,
                                      const uint16_t* k_norm, float eps, int rotary_dim, const float* inv_freq,
                                      float* block_keys) {
  const int lane = threadIdx.x % kWarp;
  const int b = first_block + blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (b >= last_block) return;
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

// Order-preserving map of a float to an unsigned key (larger float -> larger key).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__global__ void __launch_bounds__(kThreads) qsa_select_kernel(const float* queries, int heads, int dim,
                                                             const float* block_keys, const int32_t* positions,
                                                             int ratio, int block_topk, float* scores,
                                                             int32_t* selected, int32_t* selected_count) {
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t prefix, remaining;
  __shared__ int chunk_kept[kThreads], chunk_ties[kThreads];
  const int visible = positions[0] + 1, blocks = visible / ratio;
  const int keep = min(block_topk, blocks);  // blocks kept before the tail
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const float inv_sqrt_dim = rsqrtf(static_cast<float>(dim));

  // Scores: one warp per block.
  for (int b = warp; b < blocks; b += warps) {
    float score = 0.0f;
    for (int h = 0; h < heads; ++h) {
      float dot = 0.0f;
      for (int i = lane; i < dim; i += kWarp) dot += queries[h * dim + i] * block_keys[static_cast<size_t>(b) * dim + i];
      score += fmaxf(0.0f, warp_sum(dot));
    }
    if (lane == 0) scores[b] = score * inv_sqrt_dim;
  }
  __syncthreads();

  // Radix select of the keep-th largest key, 8 bits at a time from the top.
  if (threadIdx.x == 0) {
    prefix = 0;
    remaining = static_cast<uint32_t>(keep);
  }
  for (int shift = 24; shift >= 0 && keep > 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    const uint32_t mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
      const uint32_t key = order_key(scores[b]);
      if ((key & mask) == (prefix & mask)) atomicAdd(&histogram[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t need = remaining;
      for (int digit = 255; digit >= 0; --digit) {
        if (histogram[digit] >= need) {
          prefix |= static_cast<uint32_t>(digit) << shift;
          remaining = need;
          break;
        }
        need -= histogram[digit];
      }
    }
    __syncthreads();
  }
  // prefix is the threshold key; `remaining` ties at it are kept, lowest block first. Each thread owns a
  // contiguous run of blocks; prefix sums over the runs give every kept block its output slot.
  const int per_thread = (blocks + blockDim.x - 1) / blockDim.x;
  const int b_begin = min(blocks, static_cast<int>(threadIdx.x) * per_thread), b_end = min(blocks, b_begin + per_thread);
  int above = 0, ties = 0;
  for (int b = b_begin; b < b_end && keep > 0; ++b) {
    const uint32_t key = order_key(scores[b]);
    above += key > prefix;
    ties += key == prefix;
  }
  chunk_kept[threadIdx.x] = above;
  chunk_ties[threadIdx.x] = ties;
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive scans; ties become "ties this thread may keep"
    int kept_before = 0, ties_before = 0;
    for (int t = 0; t < static_cast<int>(blockDim.x); ++t) {
      const int a = chunk_kept[t], e = chunk_ties[t];
      const int allowed = max(0, min(e, static_cast<int>(remaining) - ties_before));
      chunk_kept[t] = kept_before;
      chunk_ties[t] = allowed;
      kept_before += a + allowed;
      ties_before += e;
    }
    const int tail = visible - blocks * ratio;
    for (int p = 0; p < tail; ++p) selected[kept_before * ratio + p] = blocks * ratio + p;
    *selected_count = kept_before * ratio + tail;
  }
  __syncthreads();
  int slot = chunk_kept[threadIdx.x], allowed = chunk_ties[threadIdx.x];
  for (int b = b_begin; b < b_end && keep > 0; ++b) {
    const uint32_t key = order_key(scores[b]);
    if (key > prefix || (key == prefix && allowed-- > 0)) {
      for (int r = 0; r < ratio; ++r) selected[slot * ratio + r] = b * ratio + r;
      ++slot;
    }
  }
}

// The block completed by the token at positions[0], if any (decode: one warp).
__global__ void qsa_block_key_step_kernel(const float* raw_keys, const int32_t* positions, int ratio, int dim,
                                          const uint16_t* k_norm, float eps, int rotary_dim, const float* inv_freq,
                                          float* block_keys) {
  const int visible = positions[0] + 1;
  if (visible % ratio != 0) return;
  const int b = visible / ratio - 1, lane = threadIdx.x;
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

__global__ void qsa_append_key_kernel(const float* key, const int32_t* positions, int dim, float* raw_keys) {
  for (int i = threadIdx.x; i < dim; i += blockDim.x) raw_keys[static_cast<size_t>(positions[0]) * dim + i] = key[i];
}

}  // namespace

void launch_qsa_append_key(const float* key, const int32_t* positions, int32_t dim, float* raw_keys,
                           cudaStream_t stream) {
  qsa_append_key_kernel<<<1, 128, 0, stream>>>(key, positions, dim, raw_keys);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_qsa_block_key_step(const float* raw_keys, const int32_t* positions, int32_t ratio, int32_t dim,
                               const uint16_t* k_norm, float eps, int32_t rotary_dim, const float* inv_freq,
                               float* block_keys, cudaStream_t stream) {
  qsa_block_key_step_kernel<<<1, kWarp, 0, stream>>>(raw_keys, positions, ratio, dim, k_norm, eps, rotary_dim, inv_freq,
                                                     block_keys);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_qsa_block_keys(const float* raw_keys, int32_t first_block, int32_t last_block, int32_t ratio, int32_t dim,
                           const uint16_t* k_norm, float eps, int32_t rotary_dim, const float* inv_freq,
                           float* block_keys, cudaStream_t stream) {
  if (last_block <= first_block) return;
  constexpr int kWarpsPerBlock = 8;
  const int count = last_block - first_block;
  qsa_block_keys_kernel<<<(count + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * kWarp, 0, stream>>>(
      raw_keys, first_block, last_block, ratio, dim, k_norm, eps, rotary_dim, inv_freq, block_keys);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_qsa_select(const float* queries, int32_t heads, int32_t dim, const float* block_keys,
                       const int32_t* positions, int32_t ratio, int32_t block_topk, float* scores, int32_t* selected, int32_t* selected_count,
                       cudaStream_t stream) {
  qsa_select_kernel<<<1, kThreads, 0, stream>>>(queries, heads, dim, block_keys, positions, ratio, block_topk, scores,
                                                selected, selected_count);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
