// The pieces of the sampling rule that the host (runtime::sample_token) and the CUDA sampling kernel
// (cuda/kernels/sampling.cu) must compute bit for bit alike: the counter-based random draw, each token's
// sampling weight, the top-p target and the inverse-CDF target. Plain C++17 usable from host and device code:
// only IEEE-754 operations that round the same everywhere (add, multiply, divide, fused multiply-add with
// explicit calls, rint, conversions) and integer arithmetic; no libm transcendental (expf/exp differ between
// glibc and CUDA in the last bit) and no a*b+c that a compiler could contract on one side only.
//
// The rule (runtime/sampler.cpp states it in full; the kernel follows it step by step):
//   weights   m = max logit, s = float(log2(e) / double(T)) clamped to FLT_MAX, y_i = fl(fl(l_i - m) * s) <= 0,
//             e_i = 2^y_i by weight_key (exactly 1 for the top token; 0 when y_i < -40 or NaN),
//             key_i = the bits of e_i (non-negative floats order as their bits), w_i = floor(e_i * 2^40) in
//             [0, 2^40]: the integer weight; sums of w are exact and independent of summation order.
//   order     by key descending, then index ascending (a total order).
//   min-p     candidates: e_i >= max(min_p, 2^-40) (so w_i >= 1), the top token always among them.
//   top-k     the first k candidates in that order.
//   top-p     the shortest prefix (same order) of what is left whose w-sum reaches top_p_target(top_p, sum).
//   draw      u = uniform(seed, draw index); t = draw_target(u, S), S the w-sum of the kept tokens; the token
//             is the kept one of lowest index whose running w-sum over kept tokens in index order exceeds t.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define IMP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define IMP_HOST_DEVICE inline
#endif

namespace imp::runtime::sampling_rule {

// Weights are floor(e * 2^kWeightBits): the top token weighs exactly 2^40, tokens below 2^-40 of it weigh 0
// and are never chosen. Sums stay below 2^63 for vocabularies up to 2^22 tokens.
constexpr int kWeightBits = 40;
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr float kMinWeight = 0x1p-40f;  // the smallest e with a nonzero weight

// splitmix64 (Vigna): the draw-th output (0-based) of the generator seeded with `seed`, computed directly
// from the counter, so any draw can be made on any device without carrying generator state.
IMP_HOST_DEVICE uint64_t splitmix64(uint64_t seed, uint64_t draw) {
  uint64_t z = seed + (draw + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) with 53 random bits: the draw-th of the stream `seed`.
IMP_HOST_DEVICE double uniform(uint64_t seed, uint64_t draw) {
  return static_cast<double>(splitmix64(seed, draw) >> 11) * 0x1p-53;
}

IMP_HOST_DEVICE float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

IMP_HOST_DEVICE uint32_t bits_of(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

// IEEE single operations, round to nearest even, never contracted or reassociated.
IMP_HOST_DEVICE float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
IMP_HOST_DEVICE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
IMP_HOST_DEVICE float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
IMP_HOST_DEVICE float rint_rn(float a) {
#ifdef __CUDA_ARCH__
  return rintf(a);
#else
  return std::rint(a);  // the default rounding mode: to nearest even
#endif
}

// The per-row scale of (logit - max): log2(e) / T in double, rounded to float, at most FLT_MAX (a tiny T
// must not turn 0 * inf into NaN for the top token). Only for T > 0.
IMP_HOST_DEVICE float temperature_scale(float temperature) {
#ifdef __CUDA_ARCH__
  const float s = __double2float_rn(__ddiv_rn(1.4426950408889634, static_cast<double>(temperature)));
#else
  const float s = static_cast<float>(1.4426950408889634 / static_cast<double>(temperature));
#endif
  return s <= 3.40282347e38f ? s : 3.40282347e38f;
}

// e = 2^y for y = (logit - max) * scale in [-40, 0] as float bits; 0 below -40 (and for NaN). 2^y = 2^k * 2^f,
// k = rint(y), f = y - k in [-1/2, 1/2] (exact by Sterbenz), 2^f by its degree-7 Taylor polynomial (Horner, fma),
// 2^k applied exactly. The top token (y = 0) gets exactly 1.
IMP_HOST_DEVICE uint32_t weight_key(float logit, float max_logit, float scale) {
  const float y = mul_rn(sub_rn(logit, max_logit), scale);
  if (!(y >= -40.0f)) return 0;
  const float k = rint_rn(y);
  const float f = sub_rn(y, k);
  float p = 0x1.ffcbfcp-17f;
  p = fma_rn(p, f, 0x1.430912p-13f);
  p = fma_rn(p, f, 0x1.5d87fep-10f);
  p = fma_rn(p, f, 0x1.3b2ab6p-7f);
  p = fma_rn(p, f, 0x1.c6b08ep-5f);
  p = fma_rn(p, f, 0x1.ebfbe0p-3f);
  p = fma_rn(p, f, 0x1.62e430p-1f);
  p = fma_rn(p, f, 1.0f);
  const int exponent = static_cast<int>(k);  // in [-40, 0]
  return bits_of(mul_rn(p, float_from_bits(static_cast<uint32_t>(127 + exponent) << 23)));
}

// w = floor(e * 2^40) of a key (exact: the product is a power-of-two scaling).
IMP_HOST_DEVICE uint64_t key_weight(uint32_t key) {
  const float scaled = mul_rn(float_from_bits(key), 0x1p40f);
#ifdef __CUDA_ARCH__
  return __float2ull_rz(scaled);
#else
  return static_cast<uint64_t>(scaled);
#endif
}

// The candidates' key floor: max(min_p, 2^-40), at most 1, as float bits (min-p relative to the top token,
// whose e is 1; NaN or <= 0: off).
IMP_HOST_DEVICE uint32_t candidate_floor_key(float min_p) {
  float floor = kMinWeight;
  if (min_p > floor) floor = min_p;
  if (floor > 1.0f) floor = 1.0f;
  return bits_of(floor);
}

IMP_HOST_DEVICE double u64_to_double(uint64_t x) {
#ifdef __CUDA_ARCH__
  return __ull2double_rn(x);
#else
  return static_cast<double>(x);  // x < 2^63: one rounding to nearest
#endif
}

// Top-p keeps the shortest prefix whose w-sum reaches P = ceil(fl(double(top_p) * fl(double(total)))),
// clamped to [1, total].
IMP_HOST_DEVICE uint64_t top_p_target(float top_p, uint64_t total) {
  const double total_d = u64_to_double(total);
#ifdef __CUDA_ARCH__
  const double target = ceil(__dmul_rn(static_cast<double>(top_p), total_d));
#else
  const double target = std::ceil(static_cast<double>(top_p) * total_d);
#endif
  if (!(target < total_d)) return total;  // also NaN
  if (!(target >= 1.0)) return 1;
  return static_cast<uint64_t>(target);
}

// The inverse-CDF target: floor(floor(u * 2^53) * total / 2^53), exact in 128-bit arithmetic; in [0, total)
// for total >= 1 (u outside [0, 1) is clamped).
IMP_HOST_DEVICE uint64_t draw_target(double u, uint64_t total) {
  uint64_t u53 = 0;
  if (u >= 1.0) {
    u53 = (uint64_t{1} << 53) - 1;
  } else if (u > 0.0) {
#ifdef __CUDA_ARCH__
    u53 = __double2ull_rz(__dmul_rn(u, 0x1p53));
#else
    u53 = static_cast<uint64_t>(u * 0x1p53);
#endif
  }
#ifdef __CUDA_ARCH__
  const uint64_t lo = u53 * total, hi = __umul64hi(u53, total);
  return (hi << 11) | (lo >> 53);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(u53) * total) >> 53);
#endif
}

}  // namespace imp::runtime::sampling_rule

#undef IMP_HOST_DEVICE
