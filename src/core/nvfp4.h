// NVFP4 weights in NVIDIA ModelOpt layout, for a projection W [N, K] (y = x W^T):
//   codes   U8  [N, K/2]   byte j of row n: element 2j in the low nibble, 2j+1 in the high nibble (E2M1)
//   scales  E4M3 [N, K/16] one scale per 16 consecutive elements along K, row-major, not swizzled
//   scale_2 F32 scalar     per projection
// W[n,k] = e2m1(code) * e4m3(scale[n, k/16]) * scale_2; all three are multipliers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace imp {

constexpr int64_t kNvfp4BlockSize = 16;

// Dequantises the whole [rows, cols] projection W into out (row-major, rows x cols floats).
// cols (K) must be a multiple of 16; buffer sizes must match the shape exactly. The product is computed as float(e2m1 * e4m3) * scale_2 in fp32.
void dequantize_nvfp4(std::span<const uint8_t> codes, std::span<const uint8_t> scales, float scale_2,
                      int64_t rows, int64_t cols, std::span<float> out);

}  // namespace imp
