#include "cuda/kernels/moe_decode.h"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace imp::cuda {
namespace {

constexpr int kRouterThreads = 256;
constexpr int kMaxExperts = 4096;

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

  // k rounds of an argmax by warp 0 alone (no block barriers): lane l keeps the best of its experts
  // l, l + 32, ...; a round is a butterfly over the lanes' bests; the winner's lane marks it -1 (never
  // chosen again: every other probability is >= 0) and rescans its own experts.
  if (warp != 0) return;
  float lane_v = -FLT_MAX;
  int lane_i = INT_MAX;
  for (int e = lane; e < experts; e += kWarp) better(lane_v, lane_i, probs[e], e);
  for (int j = 0; j < k; ++j) {
    float v = lane_v;
    int idx = lane_i;
    for (int o = kWarp / 2; o > 0; o /= 2) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    if (lane == 0) {
      top_experts[row * k + j] = idx;
      chosen[j] = v;
    }
    if (idx < experts && idx % kWarp == lane) {
      probs[idx] = -1.0f;
      lane_v = -FLT_MAX;
      lane_i = INT_MAX;
      for (int e = lane; e < experts; e += kWarp) better(lane_v, lane_i, probs[e], e);
    }
  }
  float total = 0.0f;
  if (threadIdx.x == 0) {
    for (int j = 0; j < k; ++j) total += chosen[j];
    for (int j = 0; j < k; ++j) top_weights[row * k + j] = renormalize ? chosen[j] / total : chosen[j];
  }
}

// Two E4M3 bytes (bits 0-7 and 8-15 of `bytes`) to floats times 2^-8, exactly: the E4M3 bits placed in an
// fp16 keep their value up to 2^-8, subnormals included. Callers fold 2^8 into weight_scale_2.
__device__ __forceinline__ float2 e4m3x2_to_float2_scaled(uint32_t bytes) {
  const uint32_t spread = __byte_perm(bytes, 0u, 0x4140);  // [b0, 0, b1, 0]
  const uint32_t half_bits = ((spread << 7) & 0x3F803F80u) | ((spread << 8) & 0x80008000u);
  return __half22float2(*reinterpret_cast<const __half2*>(&half_bits));
}

constexpr float kScaleFold = 256.0f;  // undoes the 2^-8 of e4m3x2_to_float2_scaled

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One warp: rows [16*strip, 16*strip + 16) of a packed projection times one BF16 vector x (in shared
// memory as bf16x2 words), over supertiles [st_begin, st_end). Returns, in lanes with lane % 4 == 0, the
// partial dots of rows lane/4 (first) and lane/4 + 8 (second), block scales applied (times 2^-8),
// weight_scale_2 not.
__device__ __forceinline__ float2 strip_dot(const uint8_t* codes, const uint8_t* scales, int supertiles,
                                            int strip, int st_begin, int st_end, const uint32_t* x_words) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, c = 2 * (lane % 4);
  float acc_g = 0.0f, acc_g8 = 0.0f;
  const uint8_t* strip_codes = codes + static_cast<size_t>(strip) * supertiles * 512;
  const uint8_t* strip_scales = scales + static_cast<size_t>(strip) * supertiles * 64;
#pragma unroll 2
  for (int st = st_begin; st < st_end; ++st) {
    const uint4 packed = __ldg(reinterpret_cast<const uint4*>(strip_codes + static_cast<size_t>(st) * 512) + lane);
    const uint32_t* st_scales = reinterpret_cast<const uint32_t*>(strip_scales + static_cast<size_t>(st) * 64);
    const uint32_t sg = __ldg(st_scales + g), sg8 = __ldg(st_scales + g + 8);
    const float2 s01 = e4m3x2_to_float2_scaled(sg), s23 = e4m3x2_to_float2_scaled(sg >> 16);
    const float2 t01 = e4m3x2_to_float2_scaled(sg8), t23 = e4m3x2_to_float2_scaled(sg8 >> 16);
    const float row_g[4] = {s01.x, s01.y, s23.x, s23.y}, row_g8[4] = {t01.x, t01.y, t23.x, t23.y};
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t a[4];
      decode_e2m1x8(words[q], a);
      // Only column 0 of B carries x (lanes 0..3); the other columns are zero.
      const int k = 64 * st + 16 * q + c;
      const uint32_t b0 = g == 0 ? x_words[k / 2] : 0u;
      const uint32_t b1 = g == 0 ? x_words[k / 2 + 4] : 0u;
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_bf16_16816(d, a, b0, b1);
      acc_g += d[0] * row_g[q];
      acc_g8 += d[2] * row_g8[q];
    }
  }
  return make_float2(acc_g, acc_g8);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

constexpr int kGateUpWarps = 8;  // 2 projections x 4 slices of the input dimension
constexpr int kMaxHidden = 8192;

// Block: one (row, choice) task and one strip of 16 intermediate rows, for gate and up together.
__global__ void expert_gate_up_kernel(const uint8_t* pool, const model::SlotScales* scales,
                                      model::ExpertSlotLayout layout, const float* x, const int32_t* slots, int k,
                                      uint16_t* act) {
  extern __shared__ __align__(16) uint32_t x_words[];  // [H/2] bf16x2
  __shared__ float partial[kGateUpWarps][16];
  const int task = blockIdx.y, strip = blockIdx.x, row = task / k;
  const int H = layout.hidden, I = layout.padded_intermediate;
  const float* xr = x + static_cast<size_t>(row) * H;
  for (int i = threadIdx.x; i < layout.padded_hidden / 2; i += blockDim.x) {
    x_words[i] = 2 * i < H ? pack_bf16x2(xr[2 * i], xr[2 * i + 1]) : 0u;  // zero beyond H: padded inputs
  }
  __syncthreads();

  const int slot = slots[task];
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const model::SlotProjection& p = warp < 4 ? layout.gate : layout.up;
  const int slice = warp % 4, supertiles = p.supertiles(), per = (supertiles + 3) / 4;
  const float2 r = strip_dot(base + p.codes, base + p.scales, supertiles, strip, slice * per,
                             min(supertiles, (slice + 1) * per), x_words);
  if (lane % 4 == 0) {
    partial[warp][lane / 4] = r.x;
    partial[warp][lane / 4 + 8] = r.y;
  }
  __syncthreads();
  if (threadIdx.x < 16) {
    const model::SlotScales s = scales[slot];
    float gate = 0.0f, up = 0.0f;
    for (int w = 0; w < 4; ++w) {
      gate += partial[w][threadIdx.x];
      up += partial[4 + w][threadIdx.x];
    }
    gate *= s.gate * kScaleFold;
    up *= s.up * kScaleFold;
    const float h = gate / (1.0f + __expf(-gate)) * up;
    const __nv_bfloat16 hb = __float2bfloat16_rn(h);
    act[static_cast<size_t>(task) * I + 16 * strip + threadIdx.x] = *reinterpret_cast<const uint16_t*>(&hb);
  }
}

constexpr int kMaxTopK = 16;

constexpr int kDownSlices = 2;  // warps per (strip, choice): each takes a slice of I

// Block: one strip of 16 output rows of one choice's expert; its warps split I. Writes the weighted
// partial partial[(row * k + j), n] (fp32); launch_expert_down then sums the k partials in order.
// Many small blocks (strips x choices) keep every SM busy: one layer is only ~28 MB of weights.
__global__ void expert_down_kernel(const uint8_t* pool, const model::SlotScales* scales,
                                   model::ExpertSlotLayout layout, const uint16_t* act, const int32_t* slots,
                                   const float* weights, float* partial_out) {
  __shared__ __align__(16) uint32_t act_words[2048];  // one choice's act row, I <= 4096 (bf16x2)
  __shared__ float partial[kDownSlices][16];
  const int strip = blockIdx.x, task = blockIdx.y;  // task = row * k + j
  const int H = layout.hidden, I = layout.padded_intermediate;
  const uint32_t* act_row = reinterpret_cast<const uint32_t*>(act + static_cast<size_t>(task) * I);
  for (int i = threadIdx.x; i < I / 2; i += blockDim.x) act_words[i] = act_row[i];
  __syncthreads();

  const int slice = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int slot = slots[task];
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const model::SlotProjection& p = layout.down;
  const int per = (p.supertiles() + kDownSlices - 1) / kDownSlices;
  const float2 r = strip_dot(base + p.codes, base + p.scales, p.supertiles(), strip, slice * per,
                             min(p.supertiles(), (slice + 1) * per), act_words);
  if (lane % 4 == 0) {
    partial[slice][lane / 4] = r.x;
    partial[slice][lane / 4 + 8] = r.y;
  }
  __syncthreads();
  const int n = 16 * strip + static_cast<int>(threadIdx.x);
  if (threadIdx.x < 16 && n < H) {  // padded rows are dropped
    float sum = 0.0f;
    for (int s = 0; s < kDownSlices; ++s) sum += partial[s][threadIdx.x];
    partial_out[static_cast<size_t>(task) * H + n] = sum * weights[task] * scales[slot].down * kScaleFold;
  }
}

// y[row, n] = sum over the k choices of partial[(row * k + j), n], in choice order (deterministic).
__global__ void sum_choices_kernel(const float* partial, int k, int H, float* y) {
  const int row = blockIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= H) return;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += partial[(static_cast<size_t>(row) * k + j) * H + n];
  y[static_cast<size_t>(row) * H + n] = sum;
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

// Above 48 KB a kernel needs an explicit opt-in (done once, never inside graph capture for small sizes).
template <typename Kernel>
void raise_shared_limit(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  IMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream) {
  if (experts > kMaxExperts || k > 64 || k > experts) throw_invalid_launch("router: more than 4096 experts or top-k above 64");
  router_topk_kernel<<<rows, kRouterThreads, 0, stream>>>(logits, experts, k, renormalize, top_experts, top_weights);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_expert_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                           const float* x, const int32_t* slots, int32_t rows, int32_t k, uint16_t* act,
                           cudaStream_t stream) {
  if (layout.padded_hidden > kMaxHidden) throw_invalid_launch("expert gate/up: hidden size above 8192");
  if (layout.format == model::SlotFormat::kBf16) {
    const size_t bytes = static_cast<size_t>(layout.hidden) * sizeof(float);
    raise_shared_limit(expert_gate_up_bf16_kernel, bytes);
    expert_gate_up_bf16_kernel<<<dim3((layout.intermediate + kBf16Warps - 1) / kBf16Warps, rows * k), kBf16Warps * kWarp,
                                 bytes, stream>>>(pool, scales, layout, x, slots, k, act);
    IMP_CUDA_CHECK_LAUNCH();
    return;
  }
  const size_t shared = static_cast<size_t>(layout.padded_hidden) * 2;
  raise_shared_limit(expert_gate_up_kernel, shared);
  const dim3 grid(layout.padded_intermediate / 16, rows * k);
  expert_gate_up_kernel<<<grid, kGateUpWarps * kWarp, shared, stream>>>(pool, scales, layout, x, slots, k, act);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_expert_down(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                        const uint16_t* act, const int32_t* slots, const float* weights, int32_t rows, int32_t k,
                        float* workspace, float* y, cudaStream_t stream) {
  if (k > kMaxTopK) throw_invalid_launch("expert down: top-k above 16");
  if (layout.format == model::SlotFormat::kBf16) {
    const size_t bytes = static_cast<size_t>(k) * layout.intermediate * sizeof(float);
    raise_shared_limit(expert_down_bf16_kernel, bytes);
    expert_down_bf16_kernel<<<dim3((layout.hidden + kBf16Warps - 1) / kBf16Warps, rows), kBf16Warps * kWarp, bytes,
                              stream>>>(pool, scales, layout, act, slots, weights, k, y);
    IMP_CUDA_CHECK_LAUNCH();
    return;
  }
  if (layout.padded_intermediate > 4096) throw_invalid_launch("expert down: intermediate size above 4096");
  expert_down_kernel<<<dim3(layout.padded_hidden / 16, rows * k), kDownSlices * kWarp, 0, stream>>>(
      pool, scales, layout, act, slots, weights, workspace);
  IMP_CUDA_CHECK_LAUNCH();
  sum_choices_kernel<<<dim3((layout.hidden + 255) / 256, rows), 256, 0, stream>>>(workspace, k, layout.hidden, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
