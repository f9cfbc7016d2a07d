#include "cuda/kernels/moe_expert.h"

#include <cuda_bf16.h>

#include <mutex>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/moe_router.cuh"
#include "cuda/kernels/nvfp4_strip.cuh"

namespace imp::cuda {
namespace {

using namespace moe;

// Block: one (row, choice) task and one strip of 16 intermediate rows, gate and up together.
__global__ void __launch_bounds__(kGateUpWarps * kWarp, 4)
    expert_gate_up_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                          const float* x, const int32_t* slots, int k, uint16_t* act) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t stage[];  // [warps][kWarpStageBytes]
  const int task = blockIdx.y, row = task / k;
  gate_up_strip(pool, scales, layout, x + static_cast<size_t>(row) * layout.hidden, slots[task], blockIdx.x, stage,
                act + static_cast<size_t>(task) * layout.padded_intermediate);
}

// Down and combine, fused. Block: one strip of 16 output rows of one token row; warp j computes choice j, and
// the block sums the k choices in choice order in shared memory and writes y directly: deterministic, no
// partial buffer.
__global__ void __launch_bounds__(kMaxTopK * kWarp)
    expert_down_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                       const uint16_t* act, const int32_t* slots, const float* weights, int k, float* y) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t stage[];  // [k][kWarpStageBytes]
  __shared__ float partial[kMaxTopK][16];
  const int strip = blockIdx.x, row = blockIdx.y, j = threadIdx.x / kWarp;
  const int task = row * k + j;
  down_strip(pool, scales, layout, act + static_cast<size_t>(task) * layout.padded_intermediate, slots[task],
             weights[task], strip, stage + j * kWarpStageBytes, partial[j]);
  __syncthreads();
  const int n = 16 * strip + static_cast<int>(threadIdx.x);
  if (threadIdx.x < 16 && n < layout.hidden) {  // padded rows are dropped
    float sum = 0.0f;
    for (int c = 0; c < k; ++c) sum += partial[c][threadIdx.x];
    y[static_cast<size_t>(row) * layout.hidden + n] = sum;
  }
}

// BF16 slots: one warp per weight row, 16-byte loads, fp32 dot products.
__device__ __forceinline__ float bf16_row_dot(const uint16_t* w, const float* x, int cols, int lane) {
  float acc = 0.0f;
  for (int c = lane * 8; c < cols; c += kWarp * 8) {
    const uint4 packed = __ldg(reinterpret_cast<const uint4*>(w + c));
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc += bf16_bits_to_float(words[i] & 0xffffu) * x[c + 2 * i] + bf16_bits_to_float(words[i] >> 16) * x[c + 2 * i + 1];
    }
  }
  return warp_sum(acc);
}

constexpr int kBf16Warps = 8;

__global__ void expert_gate_up_bf16_kernel(const uint8_t* pool, const model::SlotScales* scales,
                                           model::ExpertSlotLayout layout, const float* x, const int32_t* slots, int k,
                                           uint16_t* act) {
  pdl_begin();
  extern __shared__ __align__(16) float xs[];  // [H]
  const int task = blockIdx.y, row = task / k;
  const int H = layout.hidden, I = layout.intermediate;
  for (int i = threadIdx.x; i < H; i += blockDim.x) xs[i] = x[static_cast<size_t>(row) * H + i];
  __syncthreads();
  const int i = blockIdx.x * kBf16Warps + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (i >= I) return;
  const int slot = slots[task];
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const float g = bf16_row_dot(reinterpret_cast<const uint16_t*>(base + layout.gate.codes) + static_cast<size_t>(i) * H, xs, H, lane) * scales[slot].gate;
  const float u = bf16_row_dot(reinterpret_cast<const uint16_t*>(base + layout.up.codes) + static_cast<size_t>(i) * H, xs, H, lane) * scales[slot].up;
  if (lane == 0) {
    const __nv_bfloat16 h = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    act[static_cast<size_t>(task) * I + i] = *reinterpret_cast<const uint16_t*>(&h);
  }
}

__global__ void expert_down_bf16_kernel(const uint8_t* pool, const model::SlotScales* scales,
                                        model::ExpertSlotLayout layout, const uint16_t* act, const int32_t* slots,
                                        const float* weights, int k, float* y) {
  pdl_begin();
  extern __shared__ __align__(16) float acts[];  // [k][I] fp32
  const int row = blockIdx.y;
  const int H = layout.hidden, I = layout.intermediate;
  for (int i = threadIdx.x; i < k * I; i += blockDim.x) acts[i] = bf16_bits_to_float(act[static_cast<size_t>(row) * k * I + i]);
  __syncthreads();
  const int n = blockIdx.x * kBf16Warps + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (n >= H) return;
  float out = 0.0f;
  for (int j = 0; j < k; ++j) {  // fixed order: deterministic
    const int task = row * k + j, slot = slots[task];
    const uint16_t* w = reinterpret_cast<const uint16_t*>(pool + static_cast<size_t>(slot) * layout.slot_bytes + layout.down.codes);
    out += weights[task] * scales[slot].down * bf16_row_dot(w + static_cast<size_t>(n) * I, acts + j * I, I, lane);
  }
  if (lane == 0) y[static_cast<size_t>(row) * H + n] = out;
}

}  // namespace

void launch_expert_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                           const float* x, const int32_t* slots, int32_t rows, int32_t k, uint16_t* act,
                           cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  if (layout.format == model::SlotFormat::kBf16) {
    const size_t bytes = static_cast<size_t>(layout.hidden) * sizeof(float);
    raise_shared_limit_outside_capture(expert_gate_up_bf16_kernel, bytes);
    const dim3 grid((layout.intermediate + kBf16Warps - 1) / kBf16Warps, rows * k);
    launch_kernel(expert_gate_up_bf16_kernel, grid, kBf16Warps * kWarp, bytes, stream, 1, pool, scales, layout, x, slots, k,
                  act);
    return;
  }
  const size_t shared = static_cast<size_t>(kGateUpWarps) * kWarpStageBytes;  // 45 KB: within the default 48 KB
  const dim3 grid(layout.padded_intermediate / 16, rows * k);
  launch_kernel(expert_gate_up_kernel, grid, kGateUpWarps * kWarp, shared, stream, 1,
                pool, scales, layout, x, slots, k, act);
}

void launch_expert_down(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                        const uint16_t* act, const int32_t* slots, const float* weights, int32_t rows, int32_t k,
                        float* y, cudaStream_t stream) {
  if (k > kMaxTopK) throw_invalid_launch("expert down: top-k above 16");
  if (rows <= 0 || k <= 0) return;
  if (layout.format == model::SlotFormat::kBf16) {
    const size_t bytes = static_cast<size_t>(k) * layout.intermediate * sizeof(float);
    raise_shared_limit_outside_capture(expert_down_bf16_kernel, bytes);
    const dim3 grid((layout.hidden + kBf16Warps - 1) / kBf16Warps, rows);
    launch_kernel(expert_down_bf16_kernel, grid, kBf16Warps * kWarp, bytes, stream, 1, pool, scales, layout, act, slots,
                  weights, k, y);
    return;
  }
  const size_t shared = static_cast<size_t>(k) * kWarpStageBytes;  // k = 10: 56 KB (above the default 48 KB)
  static std::once_flag once;  // the opt-in, for the largest stage (k = 16)
  std::call_once(once, [] { raise_shared_limit_outside_capture(expert_down_kernel, kMaxTopK * kWarpStageBytes); });
  launch_kernel(expert_down_kernel, dim3(layout.padded_hidden / 16, rows), k * kWarp, shared, stream, 1,
                pool, scales, layout, act,
                                                                                          slots, weights, k, y);
}

}  // namespace imp::cuda
