#include "core/nvfp4.h"

#include "core/dtype.h"
#include "core/error.h"

namespace imp {

void dequantize_nvfp4(std::span<const uint8_t> codes, std::span<const uint8_t> scales, float scale_2,
                      int64_t rows, int64_t cols, std::span<float> out) {
  // Negative dims could multiply to a plausible size and pass the buffer checks below.
  if (rows < 0 || cols < 0) fail("NVFP4: negative shape [{}, {}]", rows, cols);
  if (cols % kNvfp4BlockSize != 0) fail("NVFP4: K = {} is not a multiple of {}", cols, kNvfp4BlockSize);
  const size_t n = static_cast<size_t>(rows * cols);
  if (codes.size() != n / 2 || scales.size() != n / kNvfp4BlockSize || out.size() != n) {
    fail("NVFP4: buffer sizes do not match a [{}, {}] projection", rows, cols);
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const size_t index = static_cast<size_t>(r * cols + k);
      const uint8_t byte = codes[index / 2];
      const uint8_t nibble = (k % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      const float block_scale = e4m3_to_f32(scales[index / kNvfp4BlockSize]);
      out[index] = (e2m1_to_f32(nibble) * block_scale) * scale_2;
    }
  }
}

}  // namespace imp
