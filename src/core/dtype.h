// Storage dtypes found in checkpoints and the exact scalar codecs the engine needs:
// bf16 and f16 to f32, f32 to bf16 (round to nearest even), FP8 E4M3FN and FP4 E2M1 to f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace imp {

enum class DType : uint8_t { kBF16, kF16, kF32, kF8E4M3, kU8, kI32, kI64 };

// Bytes per element.
size_t dtype_size(DType dtype);
// The safetensors spelling ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>((word + rounding) >> 16);
}

inline float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16(value)); }

float f16_to_f32(uint16_t bits);

// FP8 E4M3FN: bias 7, no infinities, 0x7f/0xff are NaN, max finite 448.
float e4m3_to_f32(uint8_t bits);
// FP4 E2M1 nibble (bit 3 = sign): magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
float e2m1_to_f32(uint8_t nibble);

}  // namespace imp
