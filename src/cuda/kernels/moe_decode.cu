#include "cuda/kernels/moe_decode.h"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRouterThreads = 256;
constexpr int kMaxExperts = 4096;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// (value, index) max with ties to the lower index.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void router_topk_kernel(const float* logits, int experts, int k, bool renormalize, int32_t* top_experts,
                                   float* top_weights) {
  __shared__ float probs[kMaxExperts];
  __shared__ float red_v[kRouterThreads / kWarp];
  __shared__ int red_i[kRouterThreads / kWarp];
  __shared__ float chosen[64];
  const int row = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const float* in = logits + static_cast<size_t>(row) * experts;

  // Max, then exp and sum (fp32), over every expert.
  float m = -FLT_MAX;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) m = fmaxf(m, probs[e] = in[e]);
  for (int o = kWarp / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) red_v[warp] = m;
  __syncthreads();
  m = red_v[0];
  for (int w = 1; w < kRouterThreads / kWarp; ++w) m = fmaxf(m, red_v[w]);
  __syncthreads();
  float s = 0.0f;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) s += probs[e] = __expf(probs[e] - m);
  s = warp_sum(s);
  if (lane == 0) red_v[warp] = s;
  __syncthreads();
  s = 0.0f;
  for (int w = 0; w < kRouterThreads / kWarp; ++w) s += red_v[w];
  const float inv = 1.0f / s;
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) probs[e] *= inv;
  __syncthreads();

  // k rounds of a block-wide argmax; a chosen expert is set to -1 so it is not chosen again.
  float total = 0.0f;
  for (int j = 0; j < k; ++j) {
    float v = -FLT_MAX;
    int idx = INT_MAX;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) better(v, idx, probs[e], e);
    for (int o = kWarp / 2; o > 0; o /= 2) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    if (lane == 0) {
      red_v[warp] = v;
      red_i[warp] = idx;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kRouterThreads / kWarp; ++w) better(v, idx, red_v[w], red_i[w]);
      top_experts[row * k + j] = idx;
      chosen[j] = v;
      probs[idx] = -1.0f;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int j = 0; j < k; ++j) total += chosen[j];
    for (int j = 0; j < k; ++j) top_weights[row * k + j] = renormalize ? chosen[j] / total : chosen[j];
  }
}

// Dot of one NVFP4 row with fp32 x over `cols` inputs, split over the warp in 16-byte chunks of 32 values.
__device__ __forceinline__ float nvfp4_row_dot(const uint8_t* codes, const uint8_t* scales, const float* x, int cols,
                                               int lane) {
  float acc = 0.0f;
  const int chunks = cols / 32;
  for (int c = lane; c < chunks; c += kWarp) {
    const uint4 packed = *reinterpret_cast<const uint4*>(codes + static_cast<size_t>(c) * 16);
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
    const float* xs = x + c * 32;
    float half_sums[2] = {0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
      for (int n = 0; n < 8; ++n) half_sums[w / 2] += e2m1_to_float((words[w] >> (4 * n)) & 0xfu) * xs[w * 8 + n];
    }
    acc += half_sums[0] * e4m3_to_float(scales[2 * c]) + half_sums[1] * e4m3_to_float(scales[2 * c + 1]);
  }
  return warp_sum(acc);
}

__global__ void expert_gate_up_kernel(const uint8_t* pool, const SlotScales* scales, ExpertSlotLayout layout,
                                      const float* x, const int32_t* slots, int k, float* act) {
  extern __shared__ float xs[];
  const int pair = blockIdx.y;  // row * k + j
  const int row = pair / k;
  const int H = layout.hidden, I = layout.intermediate;
  for (int i = threadIdx.x; i < H; i += blockDim.x) xs[i] = x[static_cast<size_t>(row) * H + i];
  __syncthreads();
  const int slot = slots[pair];
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const SlotScales s = scales[slot];
  const int lane = threadIdx.x % kWarp;
  const int i = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (i >= I) return;
  const size_t code_row = static_cast<size_t>(i) * H / 2, scale_row = static_cast<size_t>(i) * H / 16;
  const float g = nvfp4_row_dot(base + layout.gate_codes + code_row, base + layout.gate_scales + scale_row, xs, H, lane) * s.gate;
  const float u = nvfp4_row_dot(base + layout.up_codes + code_row, base + layout.up_scales + scale_row, xs, H, lane) * s.up;
  if (lane == 0) act[static_cast<size_t>(pair) * I + i] = g / (1.0f + __expf(-g)) * u;
}

__global__ void expert_down_kernel(const uint8_t* pool, const SlotScales* scales, ExpertSlotLayout layout,
                                   const float* act, const int32_t* slots, const float* weights, int k, float* y) {
  const int row = blockIdx.y;
  const int H = layout.hidden, I = layout.intermediate;
  const int lane = threadIdx.x % kWarp;
  const int n = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (n >= H) return;
  float out = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int pair = row * k + j;
    const int slot = slots[pair];
    const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
    const float dot = nvfp4_row_dot(base + layout.down_codes + static_cast<size_t>(n) * I / 2,
                                    base + layout.down_scales + static_cast<size_t>(n) * I / 16,
                                    act + static_cast<size_t>(pair) * I, I, lane);
    out += weights[pair] * dot * scales[slot].down;
  }
  if (lane == 0) y[static_cast<size_t>(row) * H + n] = out;
}

}  // namespace

void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream) {
  if (experts > kMaxExperts || k > 64 || k > experts) throw_invalid_launch("router: more than 4096 experts or top-k above 64");
  router_topk_kernel<<<rows, kRouterThreads, 0, stream>>>(logits, experts, k, renormalize, top_experts, top_weights);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_expert_gate_up(const uint8_t* pool, const SlotScales* scales, const ExpertSlotLayout& layout,
                           const float* x, const int32_t* slots, int32_t rows, int32_t k, float* act,
                           cudaStream_t stream) {
  if (layout.hidden % 32 != 0 || layout.intermediate % 32 != 0) throw_invalid_launch("expert GEMV needs H and I divisible by 32");
  constexpr int kThreads = 256, kRowsPerBlock = kThreads / kWarp;
  const dim3 grid((layout.intermediate + kRowsPerBlock - 1) / kRowsPerBlock, rows * k);
  expert_gate_up_kernel<<<grid, kThreads, layout.hidden * sizeof(float), stream>>>(pool, scales, layout, x, slots, k, act);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_expert_down(const uint8_t* pool, const SlotScales* scales, const ExpertSlotLayout& layout,
                        const float* act, const int32_t* slots, const float* weights, int32_t rows, int32_t k,
                        float* y, cudaStream_t stream) {
  constexpr int kThreads = 256, kRowsPerBlock = kThreads / kWarp;
  const dim3 grid((layout.hidden + kRowsPerBlock - 1) / kRowsPerBlock, rows);
  expert_down_kernel<<<grid, kThreads, 0, stream>>>(pool, scales, layout, act, slots, weights, k, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
