#include "model/expert_slot.h"

#include <array>
#include <cstring>

#include "core/error.h"

namespace imp::model {

ExpertSlotLayout ExpertSlotLayout::make(int32_t hidden, int32_t intermediate, SlotFormat format) {
  const bool nvfp4 = format == SlotFormat::kNvfp4;
  const int32_t multiple = nvfp4 ? 16 : 8;
  if (hidden <= 0 || intermediate <= 0 || hidden % multiple != 0 || intermediate % multiple != 0) {
    fail("{} expert slots need hidden_size and moe_intermediate_size divisible by {} (got {} and {})",
         nvfp4 ? "NVFP4" : "BF16", multiple, hidden, intermediate);
  }
  auto round_up = [](int32_t v, int32_t m) { return (v + m - 1) / m * m; };
  ExpertSlotLayout l;
  l.format = format;
  l.hidden = hidden;
  l.intermediate = intermediate;
  l.padded_hidden = nvfp4 ? round_up(hidden, 64) : hidden;
  l.padded_intermediate = nvfp4 ? round_up(intermediate, 64) : intermediate;
  uint64_t offset = 0;
  auto place = [&](SlotProjection& p, int32_t rows, int32_t cols, int32_t padded_rows, int32_t padded_cols) {
    p.format = format;
    p.real_rows = rows;
    p.real_cols = cols;
    p.rows = padded_rows;
    p.cols = padded_cols;
    p.codes = offset;
    offset += (p.code_bytes() + 15) / 16 * 16;  // every region stays 16-byte aligned
    p.scales = offset;
    offset += (p.scale_bytes() + 15) / 16 * 16;
  };
  // Rows are padded like inputs (to 64): the act rows gate/up produce are the inputs down reads.
  place(l.gate, intermediate, hidden, l.padded_intermediate, l.padded_hidden);
  place(l.up, intermediate, hidden, l.padded_intermediate, l.padded_hidden);
  place(l.down, hidden, intermediate, l.padded_hidden, l.padded_intermediate);
  l.slot_bytes = offset;
  return l;
}

namespace {

// kCodeSpread[j][byte]: the bits of a packed word that checkpoint byte `byte` sets as register j's two codes
// (code_bit_position of each of its eight bits), so packing costs a table lookup per byte, not a loop per bit
// (~200 MB/s, minutes for a released checkpoint's 52 GiB of codes).
constexpr std::array<std::array<uint32_t, 256>, 4> make_code_spread() {
  std::array<std::array<uint32_t, 256>, 4> spread{};
  for (int j = 0; j < 4; ++j) {
    for (int byte = 0; byte < 256; ++byte) {
      for (int half = 0; half < 2; ++half) {
        for (int bit = 0; bit < 4; ++bit) {
          if ((byte >> (4 * half + bit)) & 1) spread[j][byte] |= 1u << code_bit_position(j, half, bit);
        }
      }
    }
  }
  return spread;
}
constexpr auto kCodeSpread = make_code_spread();

}  // namespace

void pack_projection(const SlotProjection& p, const uint8_t* codes, const uint8_t* scales, uint8_t* slot) {
  const int32_t strips = p.rows / 16, supertiles = p.supertiles();
  // The checkpoint is [real_rows, real_cols]; slot positions beyond it stay zero (value 0, scale 0).
  const uint64_t row_bytes = static_cast<uint64_t>(p.real_cols) / 2, row_scales = static_cast<uint64_t>(p.real_cols) / 16;
  uint8_t* out_codes = slot + p.codes;
  uint8_t* out_scales = slot + p.scales;
  for (int32_t s = 0; s < strips; ++s) {
    for (int32_t st = 0; st < supertiles; ++st) {
      uint8_t* block = out_codes + (static_cast<uint64_t>(s) * supertiles + st) * 512;
      for (int lane = 0; lane < 32; ++lane) {
        for (int q = 0; q < 4; ++q) {
          uint32_t word = 0;
          for (int j = 0; j < 4; ++j) {
            const uint64_t row = 16ull * s + lane / 4 + 8 * (j & 1);
            const uint64_t k = 64ull * st + 16 * q + 2 * (lane % 4) + 8 * (j >> 1);
            const bool inside = row < static_cast<uint64_t>(p.real_rows) && k < static_cast<uint64_t>(p.real_cols);
            word |= kCodeSpread[j][inside ? codes[row * row_bytes + k / 2] : 0];
          }
          for (int b = 0; b < 4; ++b) block[lane * 16 + q * 4 + b] = static_cast<uint8_t>(word >> (8 * b));
        }
      }
      uint8_t* block_scales = out_scales + (static_cast<uint64_t>(s) * supertiles + st) * 64;
      for (int r = 0; r < 16; ++r) {
        for (int q = 0; q < 4; ++q) {
          const uint64_t row = 16ull * s + r, block = 4ull * st + q;
          const bool inside = row < static_cast<uint64_t>(p.real_rows) && block < row_scales;
          block_scales[scale_byte_offset(r, q)] = inside ? scales[row * row_scales + block] : 0;
        }
      }
    }
  }
}

void pack_projection_bf16(const SlotProjection& p, const uint16_t* weights, uint8_t* slot) {
  std::memcpy(slot + p.codes, weights, p.code_bytes());
}

}  // namespace imp::model
