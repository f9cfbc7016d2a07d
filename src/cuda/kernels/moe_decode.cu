#include "cuda/kernels/moe_decode.h"

#include <cfloat>
#include <climits>
#include <mutex>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "cuda/kernels/gemv_row.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace imp::cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// Per-block timestamps of the fused decode kernels for bench/experiments/moe_phase_probe.cu, which compiles this
// file with IMP_PHASE_PROBE; no-ops otherwise. phase(kernel, i): thread 0 of the block stamps step i (and the
// SM it runs on in slot 7).
#ifdef IMP_PHASE_PROBE
__device__ unsigned long long g_phase[2][1024][8];
__device__ __forceinline__ void phase(int kernel, int i) {
  if (threadIdx.x != 0) return;
  unsigned long long t;
  unsigned int sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  g_phase[kernel][blockIdx.y * gridDim.x + blockIdx.x][i] = t;
  g_phase[kernel][blockIdx.y * gridDim.x + blockIdx.x][7] = sm;
}
#else
__device__ __forceinline__ void phase(int, int) {}
#endif

// ---------------------------------------------------------------------------------------------------------
// Router. One block of kRouterThreads per row. Selection runs on logits (softmax is monotonic) with unique
// 64-bit keys (orderable logit bits << 32 | ~expert): a larger key is a larger logit, then a lower expert id,
// so key order is exactly the reference's order (equal logits give equal probabilities; ties to the lower id).
// 1. Every thread loads its experts (tid + 256 i), builds keys and a local (max, sum of exp) softmax pair.
// 2. Each warp takes the top k of its experts in k rounds of two 32-bit redux.sync max (high, then low word);
//    only the winning lane rescans its few keys. The rounds write the warp's candidates in descending order.
// 3. Every candidate counts the candidates of the other warps above it (its rank; its own list is sorted):
//    the k of rank < k are the answer, in order. (A global top-k key has all larger keys among the candidates,
//    so its count is its exact rank; any other candidate has the k winners above it.)
// 4. Warp 0 combines the softmax pairs and writes ids and weights.
constexpr int kRouterThreads = 256;
constexpr int kRouterWarps = kRouterThreads / kWarp;
constexpr int kMaxExperts = 4096;
constexpr int kRouterMaxK = 64;

__device__ __forceinline__ uint64_t router_key(float v, int e) {
  uint32_t u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0u;  // -0 == +0, as the reference compares probabilities
  const uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(e));
}

__device__ __forceinline__ float key_logit(uint64_t key) {
  const uint32_t ordered = static_cast<uint32_t>(key >> 32);
  return __uint_as_float((ordered & 0x80000000u) ? (ordered & 0x7fffffffu) : ~ordered);
}

__device__ __forceinline__ int key_expert(uint64_t key) { return static_cast<int>(~static_cast<uint32_t>(key)); }

// Combines two partial softmax pairs (max, sum of exp(v - max)); (-inf, 0) is the identity. Symmetric.
__device__ __forceinline__ void softmax_combine(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  s = s * (m == nm ? 1.0f : expf(m - nm)) + os * (om == nm ? 1.0f : expf(om - nm));
  m = nm;
}

// k rounds of a warp's top-k over its lanes' keys (all distinct, 0 = none), descending: each round takes the
// warp's largest key with two 32-bit redux.sync max (high, then low word) and calls on_win(j, win); only the
// winning lane rescans its keys for its next best.
template <int kPer, class OnWin>
__device__ __forceinline__ void warp_topk_rounds(const uint64_t (&keys)[kPer], uint64_t best, int k, OnWin on_win) {
  for (int j = 0; j < k; ++j) {
    const uint32_t hi = __reduce_max_sync(kFull, static_cast<uint32_t>(best >> 32));
    const uint32_t lo = __reduce_max_sync(kFull, static_cast<uint32_t>(best >> 32) == hi ? static_cast<uint32_t>(best) : 0u);
    const uint64_t win = (static_cast<uint64_t>(hi) << 32) | lo;
    on_win(j, win);
    if (win != 0 && best == win) {
      best = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) best = keys[i] < win && keys[i] > best ? keys[i] : best;
    }
  }
}

template <int kPer>  // experts per thread: ceil(experts / 256), a power of two
__global__ void __launch_bounds__(kRouterThreads) router_topk_kernel(const float* logits, int experts, int k,
                                                                     bool renormalize, int32_t* top_experts,
                                                                     float* top_weights) {
  pdl_begin();
  __shared__ uint64_t cand[kRouterWarps * kRouterMaxK];
  __shared__ uint64_t chosen[kRouterMaxK];
  __shared__ float2 stats[kRouterWarps];
  const int row = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const float* in = logits + static_cast<size_t>(row) * experts;

  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = threadIdx.x + i * kRouterThreads;
    v[i] = e < experts ? in[e] : 0.0f;
  }
  uint64_t keys[kPer];
  uint64_t best = 0;  // 0: no key (every real key has a nonzero low word)
  float m = -INFINITY, s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = threadIdx.x + i * kRouterThreads;
    keys[i] = e < experts ? router_key(v[i], e) : 0;
    best = keys[i] > best ? keys[i] : best;
    if (e < experts) m = fmaxf(m, v[i]);
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (threadIdx.x + i * kRouterThreads < experts) s += expf(v[i] - m);
  }

  // Warp top-k, descending.
  warp_topk_rounds(keys, best, k, [&](int j, uint64_t win) {
    if (lane == 0) cand[warp * k + j] = win;
  });
  for (int o = kWarp / 2; o > 0; o /= 2) {
    softmax_combine(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  }
  if (lane == 0) stats[warp] = make_float2(m, s);
  __syncthreads();

  // Ranks of the candidates.
  for (int t = threadIdx.x; t < kRouterWarps * k; t += kRouterThreads) {
    const uint64_t key = cand[t];
    if (key == 0) continue;
    const int own = t / k;
    int rank = t - own * k;  // the keys before it in its own (descending) list
    for (int w = 0; w < kRouterWarps; ++w) {
      if (w == own) continue;
      const uint64_t* list = cand + w * k;
#pragma unroll 5
      for (int p = 0; p < k; ++p) rank += list[p] > key ? 1 : 0;
    }
    if (rank < k) chosen[rank] = key;
  }
  __syncthreads();

  if (warp != 0) return;
  m = lane < kRouterWarps ? stats[lane].x : -INFINITY;
  s = lane < kRouterWarps ? stats[lane].y : 0.0f;
  for (int o = kWarp / 2; o > 0; o /= 2) {
    softmax_combine(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  }
  float p[kRouterMaxK / kWarp];
  float total = 0.0f;
#pragma unroll
  for (int h = 0; h < kRouterMaxK / kWarp; ++h) {
    const int j = lane + h * kWarp;
    p[h] = j < k ? expf(key_logit(chosen[j]) - m) / s : 0.0f;
    total += p[h];
  }
  total = warp_sum(total);
#pragma unroll
  for (int h = 0; h < kRouterMaxK / kWarp; ++h) {
    const int j = lane + h * kWarp;
    if (j < k) {
      top_experts[static_cast<size_t>(row) * k + j] = key_expert(chosen[j]);
      top_weights[static_cast<size_t>(row) * k + j] = renormalize ? p[h] / total : p[h];
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// NVFP4 slot kernels.

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A unit: one (strip, supertile) of a projection, 512 bytes of codes and 64 of scales.
constexpr int kUnitCodeBytes = 512, kUnitScaleBytes = 64;
constexpr int kStageUnits = 10;  // per warp: 5760 bytes of weights in flight
constexpr int kWarpStageBytes = kStageUnits * (kUnitCodeBytes + kUnitScaleBytes);

// The cp.async of one batch (supertiles [st0, st0 + n)) of every projection into the warp's stage, in two commit
// groups: the first and second half of the supertiles, so the first half can be computed while the second lands.
template <int kProj, int kChunk>
__device__ __forceinline__ void issue_units(const uint8_t* const (&codes)[kProj], const uint8_t* const (&scales)[kProj],
                                            int st0, int n, uint8_t* stage) {
  const int lane = threadIdx.x % kWarp;
  uint8_t* stage_codes = stage;
  uint8_t* stage_scales = stage + kStageUnits * kUnitCodeBytes;
  const int half = (n + 1) / 2;
  for (int group = 0; group < 2; ++group) {
#pragma unroll
    for (int u = 0; u < kProj * kChunk; ++u) {
      const int p = u / kChunk, i = u % kChunk;
      if (i < n && (i < half) == (group == 0)) {
        cp_async16(stage_codes + u * kUnitCodeBytes + lane * 16,
                   codes[p] + static_cast<size_t>(st0 + i) * kUnitCodeBytes + lane * 16);
      }
    }
    for (int t = lane; t < kProj * kChunk * 4; t += kWarp) {
      const int u = t / 4, p = u / kChunk, i = u % kChunk;
      const uint8_t* projection_scales = scales[0];
#pragma unroll
      for (int pp = 1; pp < kProj; ++pp) projection_scales = p == pp ? scales[pp] : projection_scales;  // no local array
      if (i < n && (i < half) == (group == 0)) {
        cp_async16(stage_scales + u * kUnitScaleBytes + (t % 4) * 16,
                   projection_scales + static_cast<size_t>(st0 + i) * kUnitScaleBytes + (t % 4) * 16);
      }
    }
    cp_async_commit();
  }
}

// The MMAs of one issued batch, as each half lands (xw: the batch's bf16x2 input words, see strip_dot); leaves
// the stage free for the next batch.
template <int kProj, int kChunk>
__device__ __forceinline__ void compute_units(const uint32_t (&xw)[kChunk][2], int n, const uint8_t* stage,
                                              float (&acc)[kProj][2]) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4, q_fed = lane / 8;
  const uint8_t* stage_codes = stage;
  const uint8_t* stage_scales = stage + kStageUnits * kUnitCodeBytes;
  const uint32_t scale_select = static_cast<uint32_t>(c | ((c + 4) << 4));  // byte c of row g, byte c of row g+8
  const int half = (n + 1) / 2;
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // the first half has landed
  __syncwarp();  // the scales were copied by other lanes
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (i >= n) break;
    if (i == half) {
      cp_async_wait_all();
      __syncwarp();
    }
    const uint32_t b0 = xw[i][0], b1 = xw[i][1];
#pragma unroll
    for (int p = 0; p < kProj; ++p) {
      const int u = p * kChunk + i;
      const uint4 packed = *reinterpret_cast<const uint4*>(stage_codes + u * kUnitCodeBytes + lane * 16);
      const uint32_t* unit_scales = reinterpret_cast<const uint32_t*>(stage_scales + u * kUnitScaleBytes);
      const float2 s = e4m3x2_to_float2_scaled(__byte_perm(unit_scales[g], unit_scales[g + 8], scale_select));
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t a[4];
        decode_e2m1x8(words[q], a);
        mma_bf16_16816(d, a, q_fed == q ? b0 : 0u, q_fed == q ? b1 : 0u);
      }
      acc[p][0] += d[0] * s.x;
      acc[p][1] += d[2] * s.y;
    }
  }
  cp_async_wait_all();  // (n == 1: the second group is empty)
  __syncwarp();  // the stage is reused by the next batch
}

// The bf16x2 input words of supertiles [st0, st0 + n) a lane feeds: inputs k0, k0 + 1 and k0 + 8, k0 + 9 of each
// supertile (B rows 2c, 2c+1 and 2c+8, 2c+9 of tile q_fed), from bf16 words covering every supertile.
template <int kChunk>
__device__ __forceinline__ void load_input_words(const uint32_t* words, int st0, int n, uint32_t (&xw)[kChunk][2]) {
  const int lane = threadIdx.x % kWarp, c = lane % 4, q_fed = lane / 8;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const int k0 = 64 * (st0 + i) + 16 * q_fed + 2 * c;
    xw[i][0] = i < n ? words[k0 / 2] : 0u;
    xw[i][1] = i < n ? words[k0 / 2 + 4] : 0u;
  }
}

// One warp: rows [16 strip, 16 strip + 16) of kProj packed projections of the same shape times one BF16
// input vector, over supertiles [st_begin, st_end), kChunk supertiles per batch (kProj * kChunk <= 10 units).
// A batch first issues the lane's input loads, then every unit of the batch with cp.async into the warp's
// stage (5760 bytes: 16 bytes of codes per lane and unit, the scales by lanes 0-3 per unit) in two commit
// groups (the first and second half of the supertiles), then computes the first half once it has landed while
// the second is still arriving; so a warp has its whole batch in flight before it needs any of it.
// Tile-per-lane mma: in the mma of tile q only lanes 8q..8q+7 feed B (columns 2q, 2q+1 of B hold x of tile
// q; the others are zero), so the four mma of a supertile accumulate, in column pair c = lane % 4 of D,
// exactly tile q = c. Lane (g = lane/4, c) thus holds rows g and g + 8 of tile c and applies only their two
// block scales. acc[p] = {row g, row g + 8} partials of tile c, block scales applied (times 2^-8); the caller
// sums the four lanes of a row (quad_sum).
// kFloatInput: input is fp32 [input_len] (rounded to bf16; zero beyond input_len, the padded inputs);
// otherwise input is bf16x2 words covering every supertile.
template <int kProj, int kChunk, bool kFloatInput>
__device__ __forceinline__ void strip_dot(const uint8_t* const (&codes)[kProj], const uint8_t* const (&scales)[kProj],
                                          int st_begin, int st_end, const void* input, int input_len, uint8_t* stage,
                                          float (&acc)[kProj][2]) {
  static_assert(kProj * kChunk <= kStageUnits, "stage too small");
  const int lane = threadIdx.x % kWarp, c = lane % 4, q_fed = lane / 8;
  for (int st0 = st_begin; st0 < st_end; st0 += kChunk) {
    const int n = min(kChunk, st_end - st0);
    float2 xf[kChunk][2];
    uint32_t xw[kChunk][2];
    if constexpr (kFloatInput) {
      const float* x = static_cast<const float*>(input);
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int k0 = 64 * (st0 + i) + 16 * q_fed + 2 * c;
        xf[i][0] = i < n && k0 < input_len ? __ldg(reinterpret_cast<const float2*>(x + k0)) : make_float2(0.0f, 0.0f);
        xf[i][1] = i < n && k0 + 8 < input_len ? __ldg(reinterpret_cast<const float2*>(x + k0 + 8)) : make_float2(0.0f, 0.0f);
      }
    } else {
      load_input_words<kChunk>(static_cast<const uint32_t*>(input), st0, n, xw);
    }
    issue_units<kProj, kChunk>(codes, scales, st0, n, stage);
    if constexpr (kFloatInput) {  // bf16 now (the weights are in flight): half the registers through the compute
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        xw[i][0] = pack_bf16x2(xf[i][0].x, xf[i][0].y);
        xw[i][1] = pack_bf16x2(xf[i][1].x, xf[i][1].y);
      }
    }
    compute_units<kProj, kChunk>(xw, n, stage, acc);
  }
}

// Sum over the four lanes of a row (tiles 0..3), the same value in all four, in a fixed order.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFull, v, 1);
  return v + __shfl_xor_sync(kFull, v, 2);
}

constexpr int kGateUpWarps = 8;  // each: gate and up over a slice of the supertiles
constexpr int kGateUpChunk = kStageUnits / 2;

// One block's work of the gate/up kernels: strip `strip` (16 intermediate rows) of slot `slot`'s gate and up
// times x_row, SwiGLU, into act_row (warp w takes supertiles [w*per, (w+1)*per) of both, so each x element is
// loaded once per warp). No block barrier before the weight loads: x is read straight from global memory
// (L1/L2-resident) by the lanes that feed it.
__device__ __forceinline__ void gate_up_strip(const uint8_t* pool, const model::SlotScales* scales,
                                              const model::ExpertSlotLayout& layout, const float* x_row, int slot,
                                              int strip, uint8_t* stage, uint16_t* act_row) {
  __shared__ float partial[kGateUpWarps][2][16];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float scale_gate = 0.0f, scale_up = 0.0f;  // loaded now by the threads that finish, so the SwiGLU waits on nothing
  if (threadIdx.x < 16) {
    scale_gate = scales[slot].gate;
    scale_up = scales[slot].up;
  }
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const int supertiles = layout.gate.supertiles(), per = (supertiles + kGateUpWarps - 1) / kGateUpWarps;
  const int st_begin = min(supertiles, warp * per), st_end = min(supertiles, st_begin + per);
  const size_t strip_offset = static_cast<size_t>(strip) * supertiles;
  const uint8_t* const codes[2] = {base + layout.gate.codes + strip_offset * kUnitCodeBytes,
                                   base + layout.up.codes + strip_offset * kUnitCodeBytes};
  const uint8_t* const unit_scales[2] = {base + layout.gate.scales + strip_offset * kUnitScaleBytes,
                                         base + layout.up.scales + strip_offset * kUnitScaleBytes};
  float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  strip_dot<2, kGateUpChunk, true>(codes, unit_scales, st_begin, st_end, x_row, layout.hidden,
                                   stage + warp * kWarpStageBytes, acc);
  phase(0, 3);
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    acc[p][0] = quad_sum(acc[p][0]);
    acc[p][1] = quad_sum(acc[p][1]);
  }
  if (lane % 4 == 0) {
    for (int p = 0; p < 2; ++p) {
      partial[warp][p][lane / 4] = acc[p][0];
      partial[warp][p][lane / 4 + 8] = acc[p][1];
    }
  }
  __syncthreads();
  phase(0, 4);
  if (threadIdx.x < 16) {
    float gate = 0.0f, up = 0.0f;
    for (int w = 0; w < kGateUpWarps; ++w) {
      gate += partial[w][0][threadIdx.x];
      up += partial[w][1][threadIdx.x];
    }
    gate *= scale_gate * kScaleFold;
    up *= scale_up * kScaleFold;
    const float h = gate / (1.0f + __expf(-gate)) * up;
    const __nv_bfloat16 hb = __float2bfloat16_rn(h);
    act_row[16 * strip + threadIdx.x] = *reinterpret_cast<const uint16_t*>(&hb);
  }
}

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

constexpr int kMaxTopK = 16;

// The largest of a lane's keys: four interleaved chains, then their maximum (a short dependent chain in few
// registers; a full tree would double the keys' registers and spill at the kernel's 64-register cap).
template <int kPer>
__device__ __forceinline__ uint64_t key_max(const uint64_t (&keys)[kPer]) {
  constexpr int kChains = kPer < 4 ? kPer : 4;
  uint64_t t[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) t[c] = keys[c];
#pragma unroll
  for (int i = kChains; i < kPer; ++i) t[i % kChains] = keys[i] > t[i % kChains] ? keys[i] : t[i % kChains];
#pragma unroll
  for (int c = 1; c < kChains; ++c) t[0] = t[c] > t[0] ? t[c] : t[0];
  return t[0];
}

// Shared memory a warp_router<kPer> needs: 32 lane maxima, kMaxTopK winners, k * kPer candidates.
template <int kPer>
constexpr size_t kRouterScratchBytes = (kWarp + kMaxTopK + kMaxTopK * kPer) * sizeof(uint64_t);

// The router of one row, computed by one warp of every block that needs the choice, so the decode step has
// no router launch. The same keys, order and softmax as router_topk_kernel (the softmax sums combine in another
// order: weights may differ in the last bits). Lane j < k returns choice j (k <= kMaxTopK). The logits are read
// through L2 (__ldcg): they come from the previous kernel. No k serial rounds: tau, the k-th largest of the
// lanes' maxima, is at most the k-th largest key (the k lanes with the largest maxima hold k keys >= tau), so the
// top k are among the keys >= tau (at most k * kPer: only those k lanes have any); they are compacted into
// `scratch` and each is ranked by counting the larger ones. experts >= k, so at least k lanes hold keys.
// kWeights false: the choices only (`weight` is left as it is): the softmax is ~1/4 of the router's time (the phase
// probe, session 15), and only one block of the gate/up kernel needs it (moe_decode_gate_up_kernel).
// Not inlined: inlined, its registers made the gate/up strip's weight loop spill (measured slower, session 6).
template <int kPer, bool kWeights>  // experts per lane: experts <= 32 * kPer
__device__ __noinline__ void warp_router(const float* logits, int experts, int k, bool renormalize, uint64_t* scratch,
                                         int& expert, float& weight) {
  const int lane = threadIdx.x % kWarp;
  uint64_t* const maxima = scratch;       // [32]
  uint64_t* const top = scratch + kWarp;  // [k]
  uint64_t* const cand = top + kMaxTopK;  // [k * kPer]
  uint64_t keys[kPer];  // 0: no key (every real key has a nonzero low word); key_logit gives the logit back
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + i * kWarp;
    keys[i] = e < experts ? router_key(__ldcg(logits + e), e) : 0;
  }
  const uint64_t best = key_max(keys);
  maxima[lane] = best;
  __syncwarp();
  int rank = 0;
#pragma unroll
  for (int o = 0; o < kWarp; ++o) rank += maxima[o] > best;
  const uint64_t tau = __shfl_sync(kFull, best, __ffs(__ballot_sync(kFull, rank == k - 1)) - 1);
  int mine_count = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) mine_count += keys[i] >= tau ? 1 : 0;
  int end = mine_count;  // inclusive prefix sum over the lanes
#pragma unroll
  for (int o = 1; o < kWarp; o *= 2) {
    const int t = __shfl_up_sync(kFull, end, o);
    if (lane >= o) end += t;
  }
  const int total = __shfl_sync(kFull, end, kWarp - 1);
  int at = end - mine_count;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (keys[i] >= tau) cand[at++] = keys[i];
  }
  __syncwarp();
  for (int c = lane; c < total; c += kWarp) {
    const uint64_t key = cand[c];
    int above = 0;
    for (int o = 0; o < total; ++o) above += cand[o] > key ? 1 : 0;
    if (above < k) top[above] = key;
  }
  __syncwarp();
  const uint64_t mine = lane < k ? top[lane] : 0;
  expert = lane < k ? key_expert(mine) : 0;
  if constexpr (!kWeights) return;
  // Softmax over every expert: the maximum logit is the first choice's (lane 0), then one sum of exp.
  const float m = key_logit(__shfl_sync(kFull, mine, 0));
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (keys[i] != 0) s += expf(key_logit(keys[i]) - m);  // -0 came back as +0: the same exp
  }
  s = warp_sum(s);
  const float p = lane < k ? expf(key_logit(mine) - m) / s : 0.0f;
  const float total_p = warp_sum(p);
  weight = renormalize ? p / total_p : p;
}

// Fused decode (one row): the router, then the gate/up block of the block's choice. Grid (strips, k + 1): row
// j < k computes choice j's strips; in row k, block 0 routes with the softmax and writes top_experts and
// top_weights (the other blocks of that row exit at once), so the k * strips working blocks route without it. The
// next kernel (down) may launch only once every block has routed (the trigger comes after the routing barrier),
// and the weights block makes top_experts visible before its trigger: down then finds them in place and fetches
// its weights before its own wait (down_strip_speculative, which still checks them after the wait); it reads
// top_weights after its wait.
template <int kPer>
__global__ void __launch_bounds__(kGateUpWarps * kWarp, 4)
    moe_decode_gate_up_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                              const float* x, const float* logits, int experts, int k, bool renormalize, uint16_t* act,
                              int32_t* top_experts, float* top_weights) {
  const int j = blockIdx.y;
  const bool weights_block = j == k;
  if (weights_block && blockIdx.x != 0) return;
  phase(0, 0);
  pdl_wait();  // the logits come from the previous kernel; nothing to load before them
  phase(0, 1);
  extern __shared__ __align__(16) uint8_t stage[];  // [warps][kWarpStageBytes]
  __shared__ int chosen;
  // One warp routes (every warp would cost ~8 us of issue slots per layer). It borrows the block's weight stage
  // as scratch: gate_up_strip uses it only after the barrier.
  static_assert(kRouterScratchBytes<kPer> <= kGateUpWarps * kWarpStageBytes, "router scratch fits the stage");
  uint64_t* const scratch = reinterpret_cast<uint64_t*>(stage);
  int expert = 0;
  float weight = 0.0f;
  if (weights_block) {
    if (threadIdx.x < kWarp) {
      warp_router<kPer, true>(logits, experts, k, renormalize, scratch, expert, weight);
      if (static_cast<int>(threadIdx.x) < k) {
        top_experts[threadIdx.x] = expert;
        top_weights[threadIdx.x] = weight;
        __threadfence();  // visible before this block's trigger
      }
    }
    __syncthreads();
    pdl_trigger();
    return;
  }
  if (threadIdx.x < kWarp) {
    warp_router<kPer, false>(logits, experts, k, renormalize, scratch, expert, weight);
    if (static_cast<int>(threadIdx.x) == j) chosen = expert;  // everything resident: slot = expert id
  }
  __syncthreads();
  pdl_trigger();  // after the wait: moe_decode_down_hc_write_kernel reads older kernels' outputs before its own
  phase(0, 2);
  const int slot = chosen;
  gate_up_strip(pool, scales, layout, x, slot, blockIdx.x, stage,
                act + static_cast<size_t>(j) * layout.padded_intermediate);
  phase(0, 5);
}

// Router rows for prefill: warp_router (with the softmax) on one row per warp, eight rows per block. The block
// per row of router_topk_kernel took 40.6 us per layer for 4096 rows of 512 experts (prefill timeline 7881f24):
// its 4096 blocks ran in ~4 waves, each a chain of k warp rounds and two block barriers.
constexpr int kRouterRowWarps = 8;
template <int kPer>
__global__ void __launch_bounds__(kRouterRowWarps * kWarp)
    router_rows_kernel(const float* logits, int rows, int experts, int k, bool renormalize, int32_t* top_experts,
                       float* top_weights) {
  pdl_begin();
  __shared__ uint64_t scratch[kRouterRowWarps][kRouterScratchBytes<kPer> / sizeof(uint64_t)];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRouterRowWarps + warp;
  if (row >= rows) return;
  int expert = 0;
  float weight = 0.0f;
  warp_router<kPer, true>(logits + static_cast<size_t>(row) * experts, experts, k, renormalize, scratch[warp], expert,
                          weight);
  if (lane < k) {
    top_experts[static_cast<size_t>(row) * k + lane] = expert;
    top_weights[static_cast<size_t>(row) * k + lane] = weight;
  }
}

constexpr int kDownChunk = kStageUnits;

// Warp j's share of a down block: choice j's down projection of strip `strip` (16 output rows, all of I in
// batches of kDownChunk supertiles) times act_row, scaled by its routing weight, into partial[0..16).
__device__ __forceinline__ void down_strip(const uint8_t* pool, const model::SlotScales* scales,
                                           const model::ExpertSlotLayout& layout, const uint16_t* act_row, int slot,
                                           float route_weight, int strip, uint8_t* stage, float* partial) {
  const int lane = threadIdx.x % kWarp;
  const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
  const int supertiles = layout.down.supertiles();
  const size_t strip_offset = static_cast<size_t>(strip) * supertiles;
  const uint8_t* const codes[1] = {base + layout.down.codes + strip_offset * kUnitCodeBytes};
  const uint8_t* const unit_scales[1] = {base + layout.down.scales + strip_offset * kUnitScaleBytes};
  float acc[1][2] = {{0.0f, 0.0f}};
  strip_dot<1, kDownChunk, false>(codes, unit_scales, 0, supertiles, act_row, 0, stage, acc);
  const float r0 = quad_sum(acc[0][0]), r1 = quad_sum(acc[0][1]);
  if (lane % 4 == 0) {
    const float sd = scales[slot].down;
    partial[lane / 4] = r0 * route_weight * sd * kScaleFold;
    partial[lane / 4 + 8] = r1 * route_weight * sd * kScaleFold;
  }
}

// down_strip for the fused decode kernel, with the weights fetched before the PDL wait on top_experts as they are
// then: gate/up triggers this kernel's launch only after its block (0, 0) has written and fenced them, so they
// are this layer's choice in practice; the memory model does not promise it before the wait, so the choice is
// read again after the wait and on a miss the strip is fetched again. The result is always the chosen expert's,
// bit for bit down_strip's. One batch only (I <= 64 * kDownChunk).
__device__ __forceinline__ void down_strip_speculative(const uint8_t* pool, const model::SlotScales* scales,
                                                       const model::ExpertSlotLayout& layout, const uint16_t* act_row,
                                                       const int32_t* slots, const float* weights, int num_slots, int j,
                                                       int strip, uint8_t* stage, float* partial) {
  const int lane = threadIdx.x % kWarp, supertiles = layout.down.supertiles();
  const size_t strip_offset = static_cast<size_t>(strip) * supertiles;
  auto issue = [&](int slot) {
    const uint8_t* base = pool + static_cast<size_t>(slot) * layout.slot_bytes;
    const uint8_t* const codes[1] = {base + layout.down.codes + strip_offset * kUnitCodeBytes};
    const uint8_t* const unit_scales[1] = {base + layout.down.scales + strip_offset * kUnitScaleBytes};
    issue_units<1, kDownChunk>(codes, unit_scales, 0, supertiles, stage);
  };
  const int guess = __ldcg(slots + j);  // racing gate/up's write: old or new, never torn
  const bool issued = guess >= 0 && guess < num_slots;
  float sd = 0.0f;
  if (issued) {
    issue(guess);
    sd = scales[guess].down;  // weights: no earlier kernel writes them
  }
  pdl_wait();
  phase(1, 1);
  // The choice, its weight and the act row in one round trip; only a miss waits on the choice.
  const int slot = __ldcg(slots + j);
  const float route_weight = __ldcg(weights + j);
  uint32_t xw[kDownChunk][2];
  load_input_words<kDownChunk>(reinterpret_cast<const uint32_t*>(act_row), 0, supertiles, xw);
  if (!issued || slot != guess) {
    if (issued) {  // the guessed strip must land before its stage is overwritten
      cp_async_wait_all();
      __syncwarp();
    }
    issue(slot);
    sd = scales[slot].down;
  }
  float acc[1][2] = {{0.0f, 0.0f}};
  compute_units<1, kDownChunk>(xw, supertiles, stage, acc);
  const float r0 = quad_sum(acc[0][0]), r1 = quad_sum(acc[0][1]);
  if (lane % 4 == 0) {
    partial[lane / 4] = r0 * route_weight * sd * kScaleFold;
    partial[lane / 4 + 8] = r1 * route_weight * sd * kScaleFold;
  }
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

constexpr int kStripRows = 16;   // output rows per down block
constexpr int kSharedWarps = 8;  // shared-expert warps per down block, kSharedRows rows each
constexpr int kSharedRows = kStripRows / kSharedWarps;
constexpr int kSharedBatch = 2;  // 16-byte loads per lane and row in flight (I_s = 640: 80 chunks in two batches)

// Rows [n0, n0 + kSharedRows) (those < d) of the shared expert's down projection (bf16 [d, inter]) times
// silu(gate) * up, by one warp, without a PDL wait: `proj` is final before the kernel starts (see
// moe_decode_down_hc_write_kernel). The SwiGLU input is computed once per chunk for all rows. Per lane the order
// and expression of bf16_row_dots with SwigluX, so each row's dot is the same number.
__device__ __forceinline__ void shared_down_rows(const uint16_t* w, int inter, int n0, int d, const float* proj,
                                                 float (&dots)[kSharedRows]) {
  const int lane = threadIdx.x % kWarp, chunks = inter / 8;
  uint4 wv[kSharedRows][kSharedBatch];
  auto load_batch = [&](int c0) {
#pragma unroll
    for (int r = 0; r < kSharedRows; ++r) {
#pragma unroll
      for (int b = 0; b < kSharedBatch; ++b) {
        const int c = c0 + b * kWarp;
        wv[r][b] = c < chunks && n0 + r < d ? load_weight16(reinterpret_cast<const uint4*>(w + static_cast<size_t>(n0 + r) * inter) + c)
                                            : make_uint4(0, 0, 0, 0);
      }
    }
  };
#pragma unroll
  for (int r = 0; r < kSharedRows; ++r) dots[r] = 0.0f;
  load_batch(lane);
  const SwigluX input{proj, proj + inter};
  for (int c0 = lane; c0 < chunks; c0 += kWarp * kSharedBatch) {
    if (c0 != lane) load_batch(c0);
#pragma unroll
    for (int b = 0; b < kSharedBatch; ++b) {
      const int c = c0 + b * kWarp;
      if (c >= chunks) break;
      float xv[8];
      input(0, 8 * c, xv);
#pragma unroll
      for (int r = 0; r < kSharedRows; ++r) {
        const uint32_t words[4] = {wv[r][b].x, wv[r][b].y, wv[r][b].z, wv[r][b].w};
        float wf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          wf[2 * i] = bf16_bits_to_float(words[i] & 0xffffu);
          wf[2 * i + 1] = bf16_bits_to_float(words[i] >> 16);
        }
        dots[r] += wf[0] * xv[0] + wf[1] * xv[1] + wf[2] * xv[2] + wf[3] * xv[3] + wf[4] * xv[4] + wf[5] * xv[5] +
                   wf[6] * xv[6] + wf[7] * xv[7];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kSharedRows; ++r) dots[r] = warp_sum(dots[r]);
}

// Fused decode tail (one row): block = one strip of 16 output rows. Warps 0..k-1 compute the routed choices'
// down projections (as expert_down_kernel), warps
// k..k+7 two shared-expert rows each, and the block writes
// v = sum_j routed_j + sigmoid(gate logit) * shared into the hyper-connection streams:
// stream_row[s * d + n] += inject[s] * v (cpu::moe_block then cpu::hyper_connection_write). Blocks are small
// enough for two per SM: 160 strips on 132 SMs then run in one wave.
// Only the routed warps wait. The previous kernel (moe_decode_gate_up_kernel) lets this one launch only after its
// own wait, so every kernel before it has completed when these blocks start: the shared expert's input (the MoE
// input GEMV), the inject weights (the read-down) and the stream row (the previous write) are final, and the
// shared-expert warps compute their rows and load the stream values before the routed experts' act exists
// (after the wait the shared rows were two more HBM round trips and the stream loads one L2 round trip).
__global__ void __maxnreg__(56)  // two blocks of k = 10 per SM (576 threads)
    moe_decode_down_hc_write_kernel(const uint8_t* pool, const model::SlotScales* scales, model::ExpertSlotLayout layout,
                                    const uint16_t* act, const int32_t* slots, const float* weights, int k,
                                    int num_slots, const uint16_t* shared_down, const float* shared_proj,
                                    int shared_inter, const float* inject, int streams, float* stream_row) {
  phase(1, 0);
  pdl_trigger();  // weights first; the routed warps wait before they read act
  extern __shared__ __align__(16) uint8_t stage[];  // [k][kWarpStageBytes]
  __shared__ float partial[kMaxTopK][kStripRows];
  __shared__ float shared_out[kStripRows];
  const int strip = blockIdx.x, warp = threadIdx.x / kWarp, d = layout.hidden;
  // The writers: the first lanes of the first shared-expert warp (which never waits).
  const int n = kStripRows * strip + static_cast<int>(threadIdx.x % kWarp);
  const bool writer = warp == k && threadIdx.x % kWarp < kStripRows && n < d;  // padded rows are dropped
  HcWriteLoads loads;
  if (warp < k) {
    const uint16_t* act_row = act + static_cast<size_t>(warp) * layout.padded_intermediate;
    if (layout.down.supertiles() <= kDownChunk) {
      down_strip_speculative(pool, scales, layout, act_row, slots, weights, num_slots, warp, strip,
                             stage + warp * kWarpStageBytes, partial[warp]);
    } else {
      pdl_wait();
      phase(1, 1);
      down_strip(pool, scales, layout, act_row, slots[warp], weights[warp], strip, stage + warp * kWarpStageBytes,
                 partial[warp]);
    }
    phase(1, 2);
  } else {
    const int r0 = (warp - k) * kSharedRows;
    float dots[kSharedRows];
    shared_down_rows(shared_down, shared_inter, kStripRows * strip + r0, d, shared_proj, dots);
    // Loaded after the dots (not held across them: registers) and long before the routed warps are done.
    if (writer) loads.load(stream_row, static_cast<size_t>(d), static_cast<size_t>(n), inject, streams);
    if (threadIdx.x % kWarp == 0) {
      const float gate = sigmoidf(shared_proj[2 * shared_inter]);
#pragma unroll
      for (int r = 0; r < kSharedRows; ++r) shared_out[r0 + r] = gate * dots[r];
    }
  }
  __syncthreads();  // the writers' stores come after it, so after the routed warps' wait
  phase(1, 3);
  if (writer) {
    const int r = threadIdx.x % kWarp;
    float routed = 0.0f;
    for (int c = 0; c < k; ++c) routed += partial[c][r];
    const float v = routed + shared_out[r];
    loads.add(stream_row, static_cast<size_t>(d), static_cast<size_t>(n), streams, v);
  }
  phase(1, 4);
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

// Above 48 KB a kernel needs an explicit opt-in (done once, never inside graph capture for small sizes).
template <typename Kernel>
void raise_shared_limit(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  IMP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The NVFP4 down kernels' opt-in, once per process for their largest stage (k = 16). The first decode step may
// be captured into a graph, so the calls run in relaxed capture mode for this thread.
void raise_down_shared_limit_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const int bytes = kMaxTopK * kWarpStageBytes;
    cudaError_t status = cudaFuncSetAttribute(expert_down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (status == cudaSuccess) {
      status = cudaFuncSetAttribute(moe_decode_down_hc_write_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    }
    IMP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    IMP_CUDA_CHECK(status);
  });
}

}  // namespace

void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream) {
  if (experts > kMaxExperts || k > kRouterMaxK || k < 1 || k > experts) {
    throw_invalid_launch("router: more than 4096 experts or top-k above 64");
  }
  if (rows <= 0) return;
  if (k <= kMaxTopK && experts <= 16 * kWarp) {  // a warp per row
    const unsigned blocks = static_cast<unsigned>((rows + kRouterRowWarps - 1) / kRouterRowWarps);
    if (experts <= 4 * kWarp) {
      launch_kernel(router_rows_kernel<4>, blocks, kRouterRowWarps * kWarp, 0, stream, 1, logits, rows, experts, k,
                    renormalize, top_experts, top_weights);
    } else {
      launch_kernel(router_rows_kernel<16>, blocks, kRouterRowWarps * kWarp, 0, stream, 1, logits, rows, experts, k,
                    renormalize, top_experts, top_weights);
    }
    return;
  }
  const int per = (experts + kRouterThreads - 1) / kRouterThreads;
  if (per <= 1) {
    launch_kernel(router_topk_kernel<1>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 2) {
    launch_kernel(router_topk_kernel<2>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 4) {
    launch_kernel(router_topk_kernel<4>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else if (per <= 8) {
    launch_kernel(router_topk_kernel<8>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  } else {
    launch_kernel(router_topk_kernel<16>, rows, kRouterThreads, 0, stream, 1,
                  logits, experts, k, renormalize, top_experts, top_weights);
  }
}

void launch_expert_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                           const float* x, const int32_t* slots, int32_t rows, int32_t k, uint16_t* act,
                           cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  if (layout.format == model::SlotFormat::kBf16) {
    const size_t bytes = static_cast<size_t>(layout.hidden) * sizeof(float);
    raise_shared_limit(expert_gate_up_bf16_kernel, bytes);
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
    raise_shared_limit(expert_down_bf16_kernel, bytes);
    const dim3 grid((layout.hidden + kBf16Warps - 1) / kBf16Warps, rows);
    launch_kernel(expert_down_bf16_kernel, grid, kBf16Warps * kWarp, bytes, stream, 1, pool, scales, layout, act, slots,
                  weights, k, y);
    return;
  }
  const size_t shared = static_cast<size_t>(k) * kWarpStageBytes;  // k = 10: 56 KB (above the default 48 KB)
  raise_down_shared_limit_once();
  launch_kernel(expert_down_kernel, dim3(layout.padded_hidden / 16, rows), k * kWarp, shared, stream, 1,
                pool, scales, layout, act,
                                                                                          slots, weights, k, y);
}

void launch_moe_decode_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                               const float* x, const float* logits, int32_t experts, int32_t k, bool renormalize,
                               uint16_t* act, int32_t* top_experts, float* top_weights,
                               cudaStream_t stream) {
  if (layout.format != model::SlotFormat::kNvfp4) throw_invalid_launch("moe decode gate/up: NVFP4 slots only");
  if (experts > kMaxExperts || k < 1 || k > kMaxTopK || k > experts) {
    throw_invalid_launch("moe decode gate/up: more than 4096 experts, or top-k outside [1, 16] or above the experts");
  }
  const size_t shared = static_cast<size_t>(kGateUpWarps) * kWarpStageBytes;  // 45 KB: within the default 48 KB
  const dim3 grid(layout.padded_intermediate / 16, k + 1);  // row k: the weights block
  const unsigned threads = kGateUpWarps * kWarp;
  if (experts <= 4 * kWarp) {
    launch_kernel(moe_decode_gate_up_kernel<4>, grid, threads, shared, stream, 1, pool, scales, layout, x, logits, experts,
                  k, renormalize, act, top_experts, top_weights);
  } else if (experts <= 16 * kWarp) {
    launch_kernel(moe_decode_gate_up_kernel<16>, grid, threads, shared, stream, 1, pool, scales, layout, x, logits, experts,
                  k, renormalize, act, top_experts, top_weights);
  } else {  // up to 4096 experts: the logits spill to local memory, still correct
    launch_kernel(moe_decode_gate_up_kernel<kMaxExperts / kWarp>, grid, threads, shared, stream, 1, pool, scales, layout,
                  x, logits, experts, k, renormalize, act, top_experts, top_weights);
  }
}

void launch_moe_decode_down_hc_write(const uint8_t* pool, int32_t slots, const model::SlotScales* scales,
                                     const model::ExpertSlotLayout& layout, const uint16_t* act, const int32_t* top_experts,
                                     const float* top_weights, int32_t k, const uint16_t* shared_down,
                                     const float* shared_proj, int32_t shared_inter, const float* inject, int32_t streams,
                                     float* stream_row, cudaStream_t stream) {
  if (layout.format != model::SlotFormat::kNvfp4) throw_invalid_launch("moe decode down: NVFP4 slots only");
  if (k < 1 || k > kMaxTopK || shared_inter % 8 != 0 || streams < 1 || streams > kMaxHcStreams) {
    throw_invalid_launch("moe decode down: top-k outside [1, 16], shared intermediate size % 8 != 0 or streams outside [1, 8]");
  }
  raise_down_shared_limit_once();
  launch_kernel(moe_decode_down_hc_write_kernel, layout.padded_hidden / kStripRows, (k + kSharedWarps) * kWarp,
                static_cast<size_t>(k) * kWarpStageBytes, stream, 1, pool, scales, layout, act, top_experts, top_weights, k,
                slots, shared_down, shared_proj, shared_inter, inject, streams, stream_row);
}

}  // namespace imp::cuda
