#include "model/expert_slot.h"

#include <cstring>

#include "core/error.h"

namespace imp::model {

ExpertSlotLayout ExpertSlotLayout::make(int32_t hidden, int32_t intermediate, SlotFormat format) {
  const int32_t multiple = format == SlotFormat::kNvfp4 ? 64 : 8;
  if (hidden % multiple != 0 || intermediate % multiple != 0) {
    fail("{} expert slots need hidden_size and moe_intermediate_size divisible by {} (got {} and {})",
         format == SlotFormat::kNvfp4 ? "NVFP4" : "BF16", multiple, hidden, intermediate);
  }
  ExpertSlotLayout l;
  l.format = format;
  l.hidden = hidden;
  l.intermediate = intermediate;
  uint64_t offset = 0;
  auto place = [&offset, format](SlotProjection& p, int32_t rows, int32_t cols) {
    p.format = format;
    p.rows = rows;
    p.cols = cols;
    p.codes = offset;
    offset += (p.code_bytes() + 15) / 16 * 16;  // every region stays 16-byte aligned
    p.scales = offset;
    offset += (p.scale_bytes() + 15) / 16 * 16;
  };
  place(l.gate, intermediate, hidden);
  place(l.up, intermediate, hidden);
  place(l.down, hidden, intermediate);
  l.slot_bytes = offset;
  return l;
}

void pack_projection(const SlotProjection& p, const uint8_t* codes, const uint8_t* scales, uint8_t* slot) {
  const int32_t strips = p.rows / 16, supertiles = p.supertiles();
  const uint64_t row_bytes = static_cast<uint64_t>(p.cols) / 2, row_scales = static_cast<uint64_t>(p.cols) / 16;
  uint8_t* out_codes = slot + p.codes;
  uint8_t* out_scales = slot + p.scales;
  for (int32_t s = 0; s < strips; ++s) {
    for (int32_t st = 0; st < supertiles; ++st) {
      uint8_t* block = out_codes + (static_cast<uint64_t>(s) * supertiles + st) * 512;
      for (int lane = 0; lane < 32; ++lane) {
        for (int q = 0; q < 4; ++q) {
          for (int j = 0; j < 4; ++j) {
            const uint64_t row = 16ull * s + lane / 4 + 8 * (j & 1);
            const uint64_t k = 64ull * st + 16 * q + 2 * (lane % 4) + 8 * (j >> 1);
            block[lane * 16 + q * 4 + j] = codes[row * row_bytes + k / 2];
          }
        }
      }
      uint8_t* block_scales = out_scales + (static_cast<uint64_t>(s) * supertiles + st) * 64;
      for (int r = 0; r < 16; ++r) {
        for (int q = 0; q < 4; ++q) block_scales[r * 4 + q] = scales[(16ull * s + r) * row_scales + 4ull * st + q];
      }
    }
  }
}

void pack_projection_bf16(const SlotProjection& p, const uint16_t* weights, uint8_t* slot) {
  std::memcpy(slot + p.codes, weights, p.code_bytes());
}

}  // namespace imp::model
