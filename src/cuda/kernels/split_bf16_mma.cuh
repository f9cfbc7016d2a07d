// Matrix products of fp32 operands on mma.m16n8k16 as 3xBF16 (the chunked GDN prefill kernels).
#pragma once

#include <cstdint>

#include "cuda/kernels/device_math.cuh"

namespace imp::cuda::split_bf16_mma {

// Internal linkage, as when these lived in the kernel's .cu file: the kernels were tuned with this code inlined.
namespace {

// Every matrix product of the chunked algebra runs on mma.m16n8k16 (bf16 in, fp32 accumulate) with each fp32
// operand split into two bf16 terms: x = hi + lo, hi = bf16_rn(x), lo = bf16_rn(x - hi) (x - hi is exact in fp32),
// and
//   a b ~ a_hi b_hi + (a_hi b_lo + a_lo b_hi),
// the two correction products in a separate accumulator that is added once at the end (Ootomo & Yokota 2022:
// adding the small terms into the large accumulator loses them to the tensor core's truncating adds).
// Error per product: |a_lo b_lo| <= 2^-18 |a b| dropped, plus the rounding of lo (<= 2^-18 |x| per operand):
// ~2^-17 relative, against 2^-24 for an fp32 FMA; the sums themselves are fp32 (the tensor core truncates
// instead of rounding: <= 2^-23 per add). A dot product of length 128 therefore lands within ~1e-5 relative of
// its terms' scale; across 64 chunks of the scan the state error grows no faster than that per chunk (the
// recurrence is contractive: e^gamma <= 1, and I - beta k k^T has norm <= 1). Until session 12 these products ran
// as 3xTF32 on m16n8k8 (~2^-21 per product), which took twice the MMAs, scalar fragment loads and five
// instructions per split element instead of three; the three kernels are bound by instruction issue.
//
// Fragments (g = lane / 4, t = lane % 4), each register two bf16 with the lower k in its low half: A (16x16,
// row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..); B (16x8) b0 = (k 2t..2t+1,
// n g), b1 = (k 2t+8.., n g); C c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..).
// Shared-memory strides: a pair along a row (row-major A, n-major B) is one 8-byte load, conflict-free with a
// stride = 8 mod 32; a pair down a column (k-major B, column-major A) is two 4-byte loads, conflict-free with a
// stride = 4 mod 8. Where one array is read both ways, the row reads get the conflict-free stride.

struct FragA {
  uint32_t hi[4], lo[4];
};
struct FragB {
  uint32_t hi[2], lo[2];
};
struct Acc {  // value = m + c
  float m[4], c[4];
};

__device__ __forceinline__ void split_bf16(float2 v, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(v.x, v.y);
  lo = pack_bf16x2(v.x - __uint_as_float(hi << 16), v.y - __uint_as_float(hi & 0xffff0000u));
}

// The two values of a pair along a row (8-byte aligned) or down a column of `stride` floats.
__device__ __forceinline__ float2 row_pair(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 column_pair(const float* p, int stride) { return make_float2(p[0], p[stride]); }

// f(row, k) = {A[row][k], A[row][k + 1]} for row < 16 and even k < 16 of the tile.
template <typename F>
__device__ __forceinline__ FragA load_a(F f) {
  const int lane = threadIdx.x % kWarp, g = lane >> 2, t = lane & 3;
  const float2 v[4] = {f(g, 2 * t), f(g + 8, 2 * t), f(g, 2 * t + 8), f(g + 8, 2 * t + 8)};
  FragA r;
#pragma unroll
  for (int i = 0; i < 4; ++i) split_bf16(v[i], r.hi[i], r.lo[i]);
  return r;
}

// f(k, n) = {B[k][n], B[k + 1][n]} for even k < 16 and n < 8 of the tile.
template <typename F>
__device__ __forceinline__ FragB load_b(F f) {
  const int lane = threadIdx.x % kWarp, g = lane >> 2, t = lane & 3;
  const float2 v[2] = {f(2 * t, g), f(2 * t + 8, g)};
  FragB r;
#pragma unroll
  for (int i = 0; i < 2; ++i) split_bf16(v[i], r.hi[i], r.lo[i]);
  return r;
}

__device__ __forceinline__ void mma3(Acc& d, const FragA& a, const FragB& b) {
  mma_16816(d.c, a.lo, b.hi[0], b.hi[1]);
  mma_16816(d.c, a.hi, b.lo[0], b.lo[1]);
  mma_16816(d.m, a.hi, b.hi[0], b.hi[1]);
}

__device__ __forceinline__ void acc_zero(Acc& d) {
#pragma unroll
  for (int e = 0; e < 4; ++e) d.m[e] = d.c[e] = 0.0f;
}

// Row and column (within the 16x8 tile) of accumulator element e.
__device__ __forceinline__ int acc_row(int e) { return ((threadIdx.x % kWarp) >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int acc_col(int e) { return 2 * (threadIdx.x & 3) + (e & 1); }


}  // namespace
}  // namespace imp::cuda::split_bf16_mma
