// Device-side decoders for the narrow float formats, bit-exact with src/core/dtype.h.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

// FP4 E2M1 nibble -> float: bit 3 sign, then exponent (2 bits, bias 1) and mantissa (1 bit).
__device__ __forceinline__ float e2m1_to_float(uint32_t nibble) {
  const uint32_t exponent = (nibble >> 1) & 3u, mantissa = nibble & 1u;
  // Subnormal (exponent 0): 0 or 0.5. Normal: (1 + m/2) * 2^(e-1), built directly as float bits.
  const uint32_t bits = exponent == 0 ? (mantissa ? 0x3f000000u : 0u) : ((exponent + 126u) << 23) | (mantissa << 22);
  return __uint_as_float(bits | ((nibble & 8u) << 28));
}

// FP8 E4M3FN -> float: bias 7, subnormals, 0x7f/0xff NaN.
__device__ __forceinline__ float e4m3_to_float(uint32_t byte) {
  const uint32_t sign = (byte & 0x80u) << 24, exponent = (byte >> 3) & 0xfu, mantissa = byte & 7u;
  if (exponent == 0xfu && mantissa == 7u) return __uint_as_float(0x7fc00000u);
  if (exponent == 0) return __uint_as_float(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(mantissa) * 0.001953125f;
  return __uint_as_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) { return __uint_as_float(bits << 16); }

// One packed code word (eight E2M1 values, bit layout in model/expert_slot.h) to the four bf16x2 registers of
// an A fragment, each value times 2^-126 exactly, in 9 integer instructions (rotations and masks). Callers lift
// the other operand (kCodeLift) or the scale (nvfp4 prefill) so that no product leaves the normal range.
__device__ __forceinline__ void decode_e2m1x8(uint32_t w, uint32_t (&out)[4]) {
  using namespace model;
  static_assert(kCodeRotation0 == 0, "register 0 needs no rotation");
  out[0] = w & kCodeTargetMask;
  out[1] = __funnelshift_l(w, w, kCodeRotation1) & kCodeTargetMask;
  out[2] = __funnelshift_l(w, w, kCodeRotation2) & kCodeTargetMask;
  out[3] = (__funnelshift_l(w, w, kCodeRotation3) & (kCodeTargetMask & ~kCodeLateBits)) |
           (__funnelshift_l(w, w, kCodeLateRotation) & kCodeLateBits);
}
constexpr float kCodeScale = 0x1p-126f;  // decode_e2m1x8's factor
// The decode GEMVs' inputs (bf16) times 2^64: products with decoded codes are then the true ones times 2^-62,
// normal down to |code x| = 2^-64, and inputs stay finite up to |x| = 2^64.
constexpr float kCodeLift = 0x1p64f;

// Two E4M3 scales, the low (kHalf 0) or high (kHalf 1) 16 bits of `word` (low byte first), to floats exactly: one
// hardware conversion to f16x2 (every E4M3 value is an f16), then two widenings.
template <int kHalf>
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t word) {
  uint32_t h;
  if constexpr (kHalf == 0) {
    asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;}" : "=r"(h) : "r"(word));
  } else {
    asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(h) : "r"(word));
  }
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

}  // namespace imp::cuda
