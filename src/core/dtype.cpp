#include "core/dtype.h"

#include <array>
#include <cmath>
#include <limits>

namespace imp {
namespace {
constexpr std::array<std::string_view, 7> kNames = {"BF16", "F16", "F32", "F8_E4M3", "U8", "I32", "I64"};
constexpr std::array<size_t, 7> kSizes = {2, 2, 4, 1, 1, 4, 8};
}  // namespace

size_t dtype_size(DType dtype) { return kSizes[static_cast<size_t>(dtype)]; }
std::string_view dtype_name(DType dtype) { return kNames[static_cast<size_t>(dtype)]; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

float f16_to_f32(uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

float e4m3_to_f32(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(mantissa | 0x8), exponent - 10);
}

float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kMagnitude[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

}  // namespace imp
