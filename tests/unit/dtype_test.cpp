// Scalar codecs (bf16, f16, FP8 E4M3FN, FP4 E2M1) and NVFP4 dequantisation, checked bit-exactly against
// references written here from the format definitions rather than from the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/nvfp4.h"

namespace imp {
namespace {

uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }
float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// Same value and same sign of zero; any NaN matches any NaN.
::testing::AssertionResult same_float(float actual, float expected) {
  if (std::isnan(expected) ? std::isnan(actual) : bits_of(actual) == bits_of(expected)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << actual << " (0x" << std::hex << bits_of(actual) << "), want "
                                       << expected << " (0x" << bits_of(expected) << ")";
}

// Round-to-nearest-even to bf16 by comparing the distances to the two neighbours in double.
uint16_t reference_bf16(float value) {
  const uint32_t word = bits_of(value);
  const uint16_t lo = static_cast<uint16_t>(word >> 16);  // truncation toward zero
  const double below = bf16_to_f32(lo);
  // The neighbour past the largest finite bf16 is infinity; IEEE rounds as if it were 2^128.
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double above =
      (hi & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(value)) : bf16_to_f32(hi);
  const double d_lo = std::fabs(static_cast<double>(value) - below);
  const double d_hi = std::fabs(above - static_cast<double>(value));
  if (d_lo != d_hi) return d_lo < d_hi ? lo : hi;
  return (lo & 1) ? hi : lo;
}

TEST(DTypeBf16, DecodeIsTheHighHalfOfF32) {
  for (uint32_t code = 0; code <= 0xffff; ++code) {
    EXPECT_EQ(bits_of(bf16_to_f32(static_cast<uint16_t>(code))), code << 16) << std::hex << code;
  }
}

TEST(DTypeBf16, ExactValuesRoundTrip) {
  for (uint32_t code = 0; code <= 0xffff; ++code) {
    const float value = bf16_to_f32(static_cast<uint16_t>(code));
    if (std::isnan(value)) continue;
    ASSERT_EQ(f32_to_bf16(value), code) << std::hex << code;
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(DTypeBf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(float_of(0x3f807fff)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808001)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(float_of(0xbf808000)), 0xbf80);  // negative ties
  EXPECT_EQ(f32_to_bf16(float_of(0xbf818000)), 0xbf82);
  EXPECT_EQ(f32_to_bf16(float_of(0x3fff8000)), 0x4000);  // carry into the exponent
  EXPECT_EQ(f32_to_bf16(float_of(0x3fffffff)), 0x4000);
  EXPECT_EQ(f32_to_bf16(float_of(0x00008000)), 0x0000);  // subnormal ties
  EXPECT_EQ(f32_to_bf16(float_of(0x00018000)), 0x0002);
  EXPECT_EQ(f32_to_bf16(float_of(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_bf16(float_of(0x80000001)), 0x8000);
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f7fff)), 0x7f7f);  // largest finite stays finite
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f8000)), 0x7f80);  // tie above max overflows to inf
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(round_to_bf16(1.00390625f), 1.0f);  // 1 + 2^-8 is a tie
  EXPECT_EQ(round_to_bf16(1.01171875f), 1.015625f);
}

TEST(DTypeBf16, MatchesReferenceOnRandomAndHalfwayInputs) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 1 << 20; ++i) {
    uint32_t word = rng();
    if (i % 4 == 1) word = (word & 0xffff0000u) | 0x8000u;  // exact ties
    if (i % 4 == 2) word = (word & 0xffff0000u) | (rng() & 1 ? 0x7fffu : 0x8001u);
    const float value = float_of(word);
    if (!std::isfinite(value)) continue;
    ASSERT_EQ(f32_to_bf16(value), reference_bf16(value)) << std::hex << word;
  }
}

TEST(DTypeBf16, InfinityAndNaN) {
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  // Signalling NaNs and NaNs whose payload sits in the low half must not turn into infinity.
  for (const uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    const uint16_t bf = f32_to_bf16(float_of(nan));
    EXPECT_TRUE(std::isnan(bf16_to_f32(bf))) << std::hex << nan << " -> " << bf;
    EXPECT_EQ(bf & 0x40, 0x40) << "quiet bit, " << std::hex << nan;
    EXPECT_EQ(bf & 0x8000, (nan >> 16) & 0x8000) << "sign, " << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

// f16 from the format: bias 15, 10 mantissa bits, exponent 0 subnormal, 31 inf/NaN.
double reference_f16(uint16_t code) {
  const int e = (code >> 10) & 0x1f;
  const int m = code & 0x3ff;
  const double sign = (code & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * (m / 1024.0) * std::pow(2.0, -14);
  return sign * (1.0 + m / 1024.0) * std::pow(2.0, e - 15);
}

TEST(DTypeF16, AllCodesMatchReference) {
  for (uint32_t code = 0; code <= 0xffff; ++code) {
    ASSERT_TRUE(same_float(f16_to_f32(static_cast<uint16_t>(code)),
                           static_cast<float>(reference_f16(static_cast<uint16_t>(code)))))
        << std::hex << code;
  }
}

TEST(DTypeF16, SpecialValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_TRUE(same_float(f16_to_f32(0x8000), -0.0f));
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
  for (const uint16_t nan : {0x7c01, 0x7e00, 0x7fff, 0xfc01, 0xfe00}) EXPECT_TRUE(std::isnan(f16_to_f32(nan)));
}

// E4M3FN from the format: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal;
// S.1111.111 is NaN and there is no infinity.
float reference_e4m3(uint8_t code) {
  const int e = (code >> 3) & 0xf;
  const int m = code & 0x7;
  if (e == 0xf && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  double magnitude = (e == 0 ? m / 8.0 : 1.0 + m / 8.0);
  for (int i = 0; i < (e == 0 ? 6 : 7 - e); ++i) magnitude /= 2.0;  // 2^(1-bias) for subnormals
  for (int i = 0; i < e - 7; ++i) magnitude *= 2.0;
  return static_cast<float>((code & 0x80) ? -magnitude : magnitude);
}

TEST(DTypeE4m3, AllCodesMatchReference) {
  int nans = 0;
  float largest = 0;
  for (int code = 0; code < 256; ++code) {
    const float value = e4m3_to_f32(static_cast<uint8_t>(code));
    EXPECT_TRUE(same_float(value, reference_e4m3(static_cast<uint8_t>(code)))) << "code 0x" << std::hex << code;
    EXPECT_FALSE(std::isinf(value));
    if (std::isnan(value)) {
      ++nans;
    } else {
      largest = std::max(largest, std::fabs(value));
    }
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(largest, 448.0f);
}

TEST(DTypeE4m3, SpecialValues) {
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);
  EXPECT_EQ(e4m3_to_f32(0x77), 240.0f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0.001953125f);  // 2^-9, smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x07), 7.0f / 512.0f);  // largest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), 0.015625f);      // 2^-6, smallest normal
  EXPECT_TRUE(same_float(e4m3_to_f32(0x00), 0.0f));
  EXPECT_TRUE(same_float(e4m3_to_f32(0x80), -0.0f));
}

// E2M1 from the format: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal.
float reference_e2m1(uint8_t nibble) {
  const int e = (nibble >> 1) & 0x3;
  const int m = nibble & 0x1;
  const double magnitude = e == 0 ? m * 0.5 : (1.0 + m * 0.5) * std::pow(2.0, e - 1);
  return static_cast<float>((nibble & 0x8) ? -magnitude : magnitude);
}

TEST(DTypeE2m1, AllNibbles) {
  const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (uint8_t nibble = 0; nibble < 16; ++nibble) {
    EXPECT_TRUE(same_float(e2m1_to_f32(nibble), expected[nibble])) << int(nibble);
    EXPECT_TRUE(same_float(e2m1_to_f32(nibble), reference_e2m1(nibble))) << int(nibble);
  }
}

TEST(DTypeNames, RoundTrip) {
  for (const DType dtype :
       {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3, DType::kU8, DType::kI32, DType::kI64}) {
    EXPECT_EQ(dtype_from_name(dtype_name(dtype)), dtype);
  }
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_name(DType::kF8E4M3), "F8_E4M3");
  EXPECT_FALSE(dtype_from_name("F8_E5M2").has_value());
}

// W[n,k] rounded once: e2m1 * e4m3 has at most 5 significant bits, so the triple product is exact in
// double and the cast is the single fp32 rounding the kernel must match.
float reference_weight(uint8_t nibble, uint8_t scale, float scale_2) {
  return static_cast<float>(static_cast<double>(reference_e2m1(nibble)) * reference_e4m3(scale) * scale_2);
}

// A logical [rows, cols] matrix of nibbles and per-block scale codes, packed into the ModelOpt layout.
struct Nvfp4Matrix {
  int64_t rows, cols;
  std::vector<uint8_t> nibbles;  // [rows, cols]
  std::vector<uint8_t> scales;   // [rows, cols / 16]

  Nvfp4Matrix(int64_t r, int64_t c) : rows(r), cols(c), nibbles(r * c), scales(r * c / 16) {}
  uint8_t& nibble(int64_t r, int64_t k) { return nibbles[r * cols + k]; }
  uint8_t& scale(int64_t r, int64_t b) { return scales[r * (cols / 16) + b]; }
  std::vector<uint8_t> codes() const {
    std::vector<uint8_t> packed(rows * cols / 2, 0);
    for (int64_t i = 0; i < rows * cols; ++i) packed[i / 2] |= (nibbles[i] & 0xf) << (i % 2 ? 4 : 0);
    return packed;
  }
  std::vector<float> dequantize(float scale_2) const {
    std::vector<float> out(rows * cols, -12345.0f);
    dequantize_nvfp4(codes(), scales, scale_2, rows, cols, out);
    return out;
  }
  void expect_exact(float scale_2) const {
    const std::vector<float> out = dequantize(scale_2);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        const float want = reference_weight(nibbles[r * cols + k], scales[r * (cols / 16) + k / 16], scale_2);
        ASSERT_TRUE(same_float(out[r * cols + k], want)) << "row " << r << " k " << k << " scale_2 " << scale_2;
      }
    }
  }
};

TEST(Nvfp4, EveryNibbleInLowAndHighPosition) {
  Nvfp4Matrix m(1, 32);
  for (int j = 0; j < 16; ++j) {
    m.nibble(0, 2 * j) = static_cast<uint8_t>(j);           // low nibble of byte j
    m.nibble(0, 2 * j + 1) = static_cast<uint8_t>(15 - j);  // high nibble of byte j
  }
  m.scale(0, 0) = m.scale(0, 1) = 0x38;  // 1.0
  const std::vector<uint8_t> codes = m.codes();
  EXPECT_EQ(codes[0], 0xf0);  // element 0 -> nibble 0 in the low half, element 1 -> nibble 15 in the high half
  EXPECT_EQ(codes[3], 0xc3);
  const std::vector<float> out = m.dequantize(1.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_TRUE(same_float(out[2 * j], reference_e2m1(static_cast<uint8_t>(j)))) << "low " << j;
    EXPECT_TRUE(same_float(out[2 * j + 1], reference_e2m1(static_cast<uint8_t>(15 - j)))) << "high " << j;
  }
  m.expect_exact(1.0f);
}

TEST(Nvfp4, ExtremeAndNegativeScales) {
  // One block per scale code; each block holds all 16 nibbles.
  const std::vector<uint8_t> scale_codes = {0x01, 0x07, 0x08, 0x38, 0x7e, 0xfe, 0xb8, 0x81, 0x00, 0x80, 0x7f, 0xff};
  Nvfp4Matrix m(1, 16 * static_cast<int64_t>(scale_codes.size()));
  for (size_t b = 0; b < scale_codes.size(); ++b) {
    m.scale(0, b) = scale_codes[b];
    for (int i = 0; i < 16; ++i) m.nibble(0, 16 * b + i) = static_cast<uint8_t>((i * 5 + b) % 16);
  }
  m.expect_exact(1.0f);
  const std::vector<float> out = m.dequantize(1.0f);
  // Spot values: smallest subnormal scale, max scale, NaN scale poisons the whole block.
  EXPECT_EQ(out[0 * 16 + 1], reference_e2m1(static_cast<uint8_t>(5)) * 0.001953125f);  // 3 * 2^-9
  EXPECT_EQ(out[4 * 16 + 3], reference_e2m1(static_cast<uint8_t>((15 + 4) % 16)) * 448.0f);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(out[10 * 16 + i])) << i;
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(out[11 * 16 + i])) << i;
  EXPECT_EQ(out[4 * 16 + 0], 896.0f);  // nibble 4 (2.0) * 448
}

TEST(Nvfp4, ScaleTwoVariety) {
  Nvfp4Matrix m(2, 32);
  for (int64_t i = 0; i < 64; ++i) m.nibbles[i] = static_cast<uint8_t>(i % 16);
  m.scales = {0x01, 0x7e, 0xb3, 0x5a};
  const float min_normal = std::numeric_limits<float>::min();
  for (const float scale_2 : {1.0f, 0.5f, 3.0e-3f, -2.0f, 1.0f / 2688.0f, 0.1f, 7.77e-5f, min_normal, 1e-40f,
                              3.0e38f, 0.0f, -0.0f, INFINITY, std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(scale_2);
    m.expect_exact(scale_2);
  }
  // Overflow and underflow happen only in the final fp32 multiply.
  const std::vector<float> big = m.dequantize(3.0e38f);
  EXPECT_EQ(big[16 + 7], INFINITY);   // 6 * 448 * 3e38, row 0 block 1
  EXPECT_EQ(big[32 + 7], -INFINITY);  // 6 * e4m3(0xb3) = 6 * -0.6875, row 1 block 0
}

TEST(Nvfp4, BlocksCoverSixteenConsecutiveKAndRowsAreIndependent) {
  constexpr int64_t kRows = 3, kCols = 48;
  Nvfp4Matrix m(kRows, kCols);
  std::fill(m.nibbles.begin(), m.nibbles.end(), 0x2);  // every weight 1.0: out shows its block scale
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t b = 0; b < kCols / 16; ++b) m.scale(r, b) = static_cast<uint8_t>(0x30 + 3 * r + b);
  }
  std::vector<float> out = m.dequantize(1.0f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kCols; ++k) {
      ASSERT_EQ(out[r * kCols + k], reference_e4m3(static_cast<uint8_t>(0x30 + 3 * r + k / 16)))
          << "row " << r << " k " << k;
    }
  }
  // A patterned matrix, then row 1 rewritten: rows 0 and 2 must not move.
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t k = 0; k < kCols; ++k) m.nibble(r, k) = static_cast<uint8_t>((r * 7 + k * 3) % 16);
  }
  m.expect_exact(0.75f);
  const std::vector<float> before = m.dequantize(0.75f);
  for (int64_t k = 0; k < kCols; ++k) m.nibble(1, k) = static_cast<uint8_t>(15 - m.nibble(1, k));
  for (int64_t b = 0; b < 3; ++b) m.scale(1, b) = 0x7e;
  m.expect_exact(0.75f);
  const std::vector<float> after = m.dequantize(0.75f);
  for (const int64_t r : {0, 2}) {
    for (int64_t k = 0; k < kCols; ++k) EXPECT_EQ(bits_of(after[r * kCols + k]), bits_of(before[r * kCols + k]));
  }
}

TEST(Nvfp4, ZeroRowsIsANoOp) {
  std::vector<float> out;
  EXPECT_NO_THROW(dequantize_nvfp4({}, {}, 1.0f, 0, 32, out));
}

TEST(Nvfp4, SizeMismatchesAreErrors) {
  const std::vector<uint8_t> codes(2 * 32 / 2), scales(2 * 32 / 16);
  std::vector<float> out(2 * 32);
  EXPECT_NO_THROW(dequantize_nvfp4(codes, scales, 1.0f, 2, 32, out));
  const auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::vector<uint8_t> short_codes(31), long_codes(33), short_scales(3), long_scales(5);
  std::vector<float> short_out(63), long_out(65);
  for (const std::string& m : {
           message([&] { dequantize_nvfp4(short_codes, scales, 1.0f, 2, 32, out); }),
           message([&] { dequantize_nvfp4(long_codes, scales, 1.0f, 2, 32, out); }),
           message([&] { dequantize_nvfp4(codes, short_scales, 1.0f, 2, 32, out); }),
           message([&] { dequantize_nvfp4(codes, long_scales, 1.0f, 2, 32, out); }),
           message([&] { dequantize_nvfp4(codes, scales, 1.0f, 2, 32, short_out); }),
           message([&] { dequantize_nvfp4(codes, scales, 1.0f, 2, 32, long_out); }),
       }) {
    EXPECT_NE(m.find("[2, 32]"), std::string::npos) << m;
  }
  EXPECT_NE(message([&] { dequantize_nvfp4(codes, scales, 1.0f, 2, 16, out); }).find("NVFP4"), std::string::npos);
  EXPECT_NE(message([&] { dequantize_nvfp4(codes, scales, 1.0f, 1, 24, out); }).find("multiple of 16"),
            std::string::npos);
  EXPECT_NE(message([&] { dequantize_nvfp4(codes, scales, 1.0f, -2, -32, out); }), "no error");
}

}  // namespace
}  // namespace imp
