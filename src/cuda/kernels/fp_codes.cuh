// Device-side decoders for the narrow float formats, bit-exact with src/core/dtype.h.
#pragma once

#include <cstdint>

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

// Eight E2M1 values (four bytes, two per byte with the even input in the low nibble) to four bf16x2
// registers, exactly, with byte permutes: magnitudes index two 8-entry byte tables (the high and low byte
// of each bf16), and the sign bits are moved to bit 15 / 31.
__device__ __forceinline__ void decode_e2m1x8(uint32_t w, uint32_t (&out)[4]) {
  constexpr uint32_t kHighLo = 0x3F3F3F00u, kHighHi = 0x40404040u;  // bf16 high bytes of 0,.5,1,1.5 | 2,3,4,6
  constexpr uint32_t kLowLo = 0xC0800000u, kLowHi = 0xC0804000u;     // bf16 low bytes
  const uint32_t mag = w & 0x77777777u, mag_hi = mag >> 16;
  const uint32_t h_a = __byte_perm(kHighLo, kHighHi, mag), l_a = __byte_perm(kLowLo, kLowHi, mag);
  const uint32_t h_b = __byte_perm(kHighLo, kHighHi, mag_hi), l_b = __byte_perm(kLowLo, kLowHi, mag_hi);
  out[0] = __byte_perm(l_a, h_a, 0x5140) | ((w << 12) & 0x8000u) | ((w << 24) & 0x80000000u);
  out[1] = __byte_perm(l_a, h_a, 0x7362) | ((w << 4) & 0x8000u) | ((w << 16) & 0x80000000u);
  out[2] = __byte_perm(l_b, h_b, 0x5140) | ((w >> 4) & 0x8000u) | ((w << 8) & 0x80000000u);
  out[3] = __byte_perm(l_b, h_b, 0x7362) | ((w >> 12) & 0x8000u) | (w & 0x80000000u);
}

}  // namespace imp::cuda
