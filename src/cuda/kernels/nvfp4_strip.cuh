// One warp's NVFP4 strip dot products on mma.m16n8k16 (the decode-time expert kernels, moe_expert.cu and
// moe_decode.cu): weight units staged by cp.async or bulk copies, decoded exactly to bf16 in registers, fp32
// partial sums with the E4M3 block scales applied; and the gate/up and down work of one strip built on them.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"
#include "model/expert_slot.h"

namespace imp::cuda::moe {

// Internal linkage, as when these lived in one .cu file: each kernel file compiles its own copy, and the
// compiler keeps the freedom (calling convention of the noinline router, inlining) the kernels were tuned with.
namespace {

// Per-block timestamps of the fused decode kernels for bench/experiments/moe_phase_probe.cu, which compiles
// moe_decode.cu with IMP_PHASE_PROBE; no-ops otherwise. phase(kernel, i): thread 0 of the block stamps step i
// (and the SM it runs on in slot 7).
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

// What a strip's sums are multiplied by: the decoded codes' 2^-126 undone, the inputs' lift taken out (2^62, exact).
constexpr float kStripFold = 1.0f / (kCodeScale * kCodeLift);

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
// the stage free for the next batch. kCpAsync false: the caller has waited for the whole batch (bulk copies).
template <int kProj, int kChunk, bool kCpAsync = true>
__device__ __forceinline__ void compute_units(const uint32_t (&xw)[kChunk][2], int n, const uint8_t* stage,
                                              float (&acc)[kProj][2]) {
  const int lane = threadIdx.x % kWarp, g = lane / 4, c = lane % 4, q_fed = lane / 8;
  const uint8_t* stage_codes = stage;
  const uint8_t* stage_scales = stage + kStageUnits * kUnitCodeBytes;
  const int half = (n + 1) / 2;
  if constexpr (kCpAsync) {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // the first half has landed
    __syncwarp();  // the scales were copied by other lanes
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (i >= n) break;
    if (kCpAsync && i == half) {
      cp_async_wait_all();
      __syncwarp();
    }
    const uint32_t b0 = xw[i][0], b1 = xw[i][1];
#pragma unroll
    for (int p = 0; p < kProj; ++p) {
      const int u = p * kChunk + i;
      const uint4 packed = *reinterpret_cast<const uint4*>(stage_codes + u * kUnitCodeBytes + lane * 16);
      // Rows g and g + 8 of tile c (model::scale_byte_offset): one 16-bit word.
      const float2 s = e4m3x2_to_float2<0>(*reinterpret_cast<const uint16_t*>(stage_scales + u * kUnitScaleBytes + 2 * lane));
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t a[4];
        decode_e2m1x8(words[q], a);
        mma_16816(d, a, q_fed == q ? b0 : 0u, q_fed == q ? b1 : 0u);
      }
      acc[p][0] += d[0] * s.x;
      acc[p][1] += d[2] * s.y;
    }
  }
  if constexpr (kCpAsync) cp_async_wait_all();  // (n == 1: the second group is empty)
  __syncwarp();  // the stage is reused by the next batch
}

// A bf16x2 input word times kCodeLift (exact: a power of two, no input reaches 2^64).
__device__ __forceinline__ uint32_t lift_bf16x2(uint32_t word) {
  return bf16x2_mul(word, pack_bf16x2(kCodeLift, kCodeLift));
}

// The bf16x2 input words of supertiles [st0, st0 + n) a lane feeds, lifted: inputs k0, k0 + 1 and k0 + 8, k0 + 9 of
// each supertile (B rows 2c, 2c+1 and 2c+8, 2c+9 of tile q_fed), from bf16 words covering every supertile.
template <int kChunk>
__device__ __forceinline__ void load_input_words(const uint32_t* words, int st0, int n, uint32_t (&xw)[kChunk][2]) {
  const int lane = threadIdx.x % kWarp, c = lane % 4, q_fed = lane / 8;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const int k0 = 64 * (st0 + i) + 16 * q_fed + 2 * c;
    xw[i][0] = i < n ? words[k0 / 2] : 0u;
    xw[i][1] = i < n ? words[k0 / 2 + 4] : 0u;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    xw[i][0] = lift_bf16x2(xw[i][0]);
    xw[i][1] = lift_bf16x2(xw[i][1]);
  }
}

// One warp: rows [16 strip, 16 strip + 16) of kProj packed projections of the same shape times one BF16
// input vector (bf16x2 words covering every supertile), over supertiles [st_begin, st_end), kChunk supertiles
// per batch (kProj * kChunk <= 10 units). A batch first issues the lane's input loads, then every unit of the
// batch with cp.async into the warp's stage (5760 bytes: 16 bytes of codes per lane and unit, the scales by
// lanes 0-3 per unit) in two commit groups (the first and second half of the supertiles), then computes the
// first half once it has landed while the second is still arriving; so a warp has its whole batch in flight
// before it needs any of it.
// Tile-per-lane mma: in the mma of tile q only lanes 8q..8q+7 feed B (columns 2q, 2q+1 of B hold x of tile
// q; the others are zero), so the four mma of a supertile accumulate, in column pair c = lane % 4 of D,
// exactly tile q = c. Lane (g = lane/4, c) thus holds rows g and g + 8 of tile c and applies only their two
// block scales. acc[p] = {row g, row g + 8} partials of tile c, block scales applied (times 2^-62: kStripFold); the caller
// sums the four lanes of a row (quad_sum).
template <int kProj, int kChunk>
__device__ __forceinline__ void strip_dot(const uint8_t* const (&codes)[kProj], const uint8_t* const (&scales)[kProj],
                                          int st_begin, int st_end, const uint32_t* input, uint8_t* stage,
                                          float (&acc)[kProj][2]) {
  static_assert(kProj * kChunk <= kStageUnits, "stage too small");
  for (int st0 = st_begin; st0 < st_end; st0 += kChunk) {
    const int n = min(kChunk, st_end - st0);
    uint32_t xw[kChunk][2];
    load_input_words<kChunk>(input, st0, n, xw);
    issue_units<kProj, kChunk>(codes, scales, st0, n, stage);
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

// strip_dot's MMAs for gate and up (kProj 2) of an fp32 input x [input_len] (rounded to bf16; zero beyond
// input_len, the padded inputs), each batch's weights moved by four bulk copies (gate codes, up codes, gate
// scales, up scales: each a contiguous run of the strip) that lane 0 issues on the warp's mbarrier, into
// issue_units' stage layout (unit p * kGateUpChunk + i at codes offset 512 u, scales offset 64 u). Against
// per-lane cp.async: decode +0.2% (session 20), and no spill in the fused kernel.
__device__ __forceinline__ void gate_up_dot_bulk(const uint8_t* const (&codes)[2], const uint8_t* const (&scales)[2],
                                                 int st_begin, int st_end, const float* x, int input_len,
                                                 uint8_t* stage, float (&acc)[2][2]) {
  __shared__ uint64_t barriers[kGateUpWarps];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, c = lane % 4, q_fed = lane / 8;
  uint64_t* const bar = barriers + warp;
  if (lane == 0) mbarrier_init(bar, 1);
  __syncwarp();
  uint32_t parity = 0;
  for (int st0 = st_begin; st0 < st_end; st0 += kGateUpChunk, parity ^= 1) {
    const int n = min(kGateUpChunk, st_end - st0);
    float2 xf[kGateUpChunk][2];
#pragma unroll
    for (int i = 0; i < kGateUpChunk; ++i) {
      const int k0 = 64 * (st0 + i) + 16 * q_fed + 2 * c;
      xf[i][0] = i < n && k0 < input_len ? __ldg(reinterpret_cast<const float2*>(x + k0)) : make_float2(0.0f, 0.0f);
      xf[i][1] = i < n && k0 + 8 < input_len ? __ldg(reinterpret_cast<const float2*>(x + k0 + 8))
                                             : make_float2(0.0f, 0.0f);
    }
    fence_proxy_async();  // the router's scratch writes and the last batch's reads (generic proxy) before the copies
    __syncwarp();
    if (lane == 0) {
      mbarrier_arrive_expect_tx(bar, 2 * n * (kUnitCodeBytes + kUnitScaleBytes));
      uint8_t* const stage_scales = stage + kStageUnits * kUnitCodeBytes;
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        bulk_copy_to_shared(stage + p * kGateUpChunk * kUnitCodeBytes,
                            codes[p] + static_cast<size_t>(st0) * kUnitCodeBytes, n * kUnitCodeBytes, bar);
        bulk_copy_to_shared(stage_scales + p * kGateUpChunk * kUnitScaleBytes,
                            scales[p] + static_cast<size_t>(st0) * kUnitScaleBytes, n * kUnitScaleBytes, bar);
      }
    }
    uint32_t xw[kGateUpChunk][2];  // bf16 now (the weights are in flight): half the registers through the compute
#pragma unroll
    for (int i = 0; i < kGateUpChunk; ++i) {  // lifted before rounding: lift_bf16x2's bits for every |x| >= 2^-126
      xw[i][0] = pack_bf16x2(xf[i][0].x * kCodeLift, xf[i][0].y * kCodeLift);
      xw[i][1] = pack_bf16x2(xf[i][1].x * kCodeLift, xf[i][1].y * kCodeLift);
    }
    mbarrier_wait(bar, parity);
    compute_units<2, kGateUpChunk, false>(xw, n, stage, acc);
  }
}

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
  gate_up_dot_bulk(codes, unit_scales, st_begin, st_end, x_row, layout.hidden, stage + warp * kWarpStageBytes, acc);
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
    gate *= scale_gate * kStripFold;
    up *= scale_up * kStripFold;
    const float h = gate / (1.0f + __expf(-gate)) * up;
    const __nv_bfloat16 hb = __float2bfloat16_rn(h);
    act_row[16 * strip + threadIdx.x] = *reinterpret_cast<const uint16_t*>(&hb);
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
  strip_dot<1, kDownChunk>(codes, unit_scales, 0, supertiles, reinterpret_cast<const uint32_t*>(act_row), stage, acc);
  const float r0 = quad_sum(acc[0][0]), r1 = quad_sum(acc[0][1]);
  if (lane % 4 == 0) {
    const float sd = scales[slot].down;
    partial[lane / 4] = r0 * route_weight * sd * kStripFold;
    partial[lane / 4 + 8] = r1 * route_weight * sd * kStripFold;
  }
}

}  // namespace
}  // namespace imp::cuda::moe
