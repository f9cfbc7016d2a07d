// The K-major operand layout without swizzle that wgmma reads from shared memory (A or B): "core matrices" of
// 8 rows x 16 bytes, the two 8-element halves of a k16 step 128 bytes apart (LBO), groups of 8 rows 256 bytes
// apart (SBO); checked on the H200 by bench/experiments/wgmma_probe.cu. Used by the attention and MoE prefill
// GEMMs' staged operands and the GDN prefill's images; the swizzled form by the tensor-copied operands.
#pragma once

#include <cstdint>

namespace imp::cuda {

// Byte offset of element (row m, k) of a bf16 operand of `rows` rows: a k16 step's image is 32 * rows bytes.
__device__ __forceinline__ uint32_t kmajor_offset(int m, int k, int rows) {
  return (k / 16) * rows * 32 + (m / 8) * 256 + ((k % 16) / 8) * 128 + (m % 8) * 16 + (k % 8) * 2;
}

// The descriptor of the k16 step whose image starts at shared-memory byte `address`.
__device__ __forceinline__ uint64_t kmajor_descriptor(uint32_t address) {
  return ((address >> 4) & 0x3fff) | (uint64_t{128 >> 4} << 16) | (uint64_t{256 >> 4} << 32);
}

// The 128-byte swizzle that tensor copies leave (layout type 1): rows of 128 bytes, 16-byte chunk i of row r at
// chunk i ^ (r % 8), 8-row groups 1024 bytes apart (SBO), 1024-byte aligned atoms. K-major: one k16 step 32 bytes
// into the rows (LBO unused); MN-major: LBO the step between 64-element column blocks.
__device__ __forceinline__ uint64_t swizzled_descriptor(uint32_t address, uint32_t lbo) {
  return ((address >> 4) & 0x3fff) | (static_cast<uint64_t>(lbo >> 4) << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

}  // namespace imp::cuda
