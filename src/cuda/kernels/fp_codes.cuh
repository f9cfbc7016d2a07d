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

}  // namespace imp::cuda
