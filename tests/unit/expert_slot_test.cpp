// The expert slot format: packing is a bit permutation into mma.m16n8k16 A-fragment order that the kernels'
// rotate-and-mask decode turns into the checkpoint's values (times 2^-126).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "core/error.h"
#include "model/expert_slot.h"

namespace imp::model {
namespace {

TEST(ExpertSlot, LayoutOfTheReleasedShapes) {
  const ExpertSlotLayout l = ExpertSlotLayout::make(2560, 640);
  EXPECT_EQ(l.gate.code_bytes(), 819200u);
  EXPECT_EQ(l.gate.scale_bytes(), 102400u);
  EXPECT_EQ(l.slot_bytes, 3u * (819200u + 102400u));
  for (const SlotProjection* p : {&l.gate, &l.up, &l.down}) {
    EXPECT_EQ(p->codes % 16, 0u);
    EXPECT_EQ(p->scales % 16, 0u);
  }
  EXPECT_THROW(ExpertSlotLayout::make(2560, 600), Error);
}

TEST(ExpertSlot, TinyShapesArePaddedWithZeros) {
  const ExpertSlotLayout l = ExpertSlotLayout::make(64, 16);  // the NVFP4 golden fixture's shape
  EXPECT_EQ(l.padded_hidden, 64);
  EXPECT_EQ(l.padded_intermediate, 64);
  EXPECT_EQ(l.gate.real_rows, 16);
  EXPECT_EQ(l.down.real_cols, 16);
  // down [64, 16]: checkpoint codes [64, 8] all 0xFF, scales [64, 1] all 0x38 (1.0).
  std::vector<uint8_t> codes(64 * 8, 0xFF), scales(64, 0x38), slot(l.slot_bytes, 0xEE);
  pack_projection(l.down, codes.data(), scales.data(), slot.data());
  size_t real = 0, zero = 0;
  for (uint64_t b = 0; b < l.down.code_bytes(); ++b) {
    const uint8_t v = slot[l.down.codes + b];
    real += v == 0xFF;
    zero += v == 0x00;
  }
  EXPECT_EQ(real, codes.size());               // every checkpoint byte once
  EXPECT_EQ(real + zero, l.down.code_bytes());  // everything else zero
  size_t real_scales = 0;
  for (uint64_t b = 0; b < l.down.scale_bytes(); ++b) real_scales += slot[l.down.scales + b] == 0x38;
  EXPECT_EQ(real_scales, scales.size());
}

TEST(ExpertSlot, Bf16SlotsHoldRowMajorWeights) {
  const ExpertSlotLayout l = ExpertSlotLayout::make(32, 8, SlotFormat::kBf16);
  EXPECT_EQ(l.gate.code_bytes(), 8u * 32 * 2);
  EXPECT_EQ(l.gate.scale_bytes(), 0u);
  EXPECT_EQ(l.slot_bytes, 3u * 512);
  std::vector<uint16_t> w(8 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i * 3);
  std::vector<uint8_t> slot(l.slot_bytes, 0);
  pack_projection_bf16(l.up, w.data(), slot.data());
  EXPECT_EQ(std::memcmp(slot.data() + l.up.codes, w.data(), w.size() * 2), 0);
  EXPECT_THROW(ExpertSlotLayout::make(36, 8, SlotFormat::kBf16), Error);
}

// The kernels' decode of one packed word (fp_codes.cuh, decode_e2m1x8), on the host: register j of the A fragment.
uint32_t rotl(uint32_t w, int d) { return d == 0 ? w : (w << d) | (w >> (32 - d)); }
std::array<uint32_t, 4> decode_word(uint32_t w) {
  return {rotl(w, kCodeRotation0) & kCodeTargetMask, rotl(w, kCodeRotation1) & kCodeTargetMask,
          rotl(w, kCodeRotation2) & kCodeTargetMask,
          (rotl(w, kCodeRotation3) & kCodeTargetMask & ~kCodeLateBits) | (rotl(w, kCodeLateRotation) & kCodeLateBits)};
}

// E2M1 by its definition (sign, 2-bit exponent with bias 1, 1-bit mantissa).
float e2m1_value(int code) {
  static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8) ? -kMagnitudes[code & 7] : kMagnitudes[code & 7];
}

float bf16_value(uint32_t bits) {
  const uint32_t f = bits << 16;
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

TEST(ExpertSlot, PackedWordsDecodeToTheFragmentValues) {
  const ExpertSlotLayout l = ExpertSlotLayout::make(128, 64);
  const SlotProjection& p = l.down;  // [128, 64]: 8 strips x 1 supertile
  std::vector<uint8_t> codes(p.code_bytes()), scales(p.scale_bytes());
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / 256);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> slot(l.slot_bytes, 0xEE);
  pack_projection(p, codes.data(), scales.data(), slot.data());
  const uint8_t* out = slot.data() + p.codes;
  // Every value of the fragment: strip s, lane t, tile q, register j, half h is row 16 s + t/4 + 8 (j & 1),
  // input 16 q + 2 (t % 4) + 8 (j >> 1) + h, and decodes to that checkpoint value times 2^-126.
  std::set<std::pair<int, int>> seen;
  for (int s = 0; s < 8; ++s) {
    for (int t = 0; t < 32; ++t) {
      for (int q = 0; q < 4; ++q) {
        uint32_t w;
        std::memcpy(&w, out + 512 * s + 16 * t + 4 * q, 4);
        const std::array<uint32_t, 4> regs = decode_word(w);
        for (int j = 0; j < 4; ++j) {
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * s + t / 4 + 8 * (j & 1), k = 16 * q + 2 * (t % 4) + 8 * (j >> 1) + h;
            const int code = (codes[row * 32 + k / 2] >> (4 * (k % 2))) & 15;
            const float got = bf16_value(regs[j] >> (16 * h) & 0xffffu);
            EXPECT_EQ(got, std::ldexp(e2m1_value(code), -126)) << "row " << row << " input " << k;
            EXPECT_EQ(std::signbit(got), (code & 8) != 0) << "row " << row << " input " << k;
            seen.insert({row, k});
          }
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), 128u * 64u);  // every checkpoint value once
  // Every code in every place: a word of eight equal codes decodes to eight equal values.
  for (int code = 0; code < 16; ++code) {
    std::vector<uint8_t> same(codes.size(), static_cast<uint8_t>(code | code << 4));
    pack_projection(p, same.data(), scales.data(), slot.data());
    uint32_t w;
    std::memcpy(&w, out + 512 * 3 + 16 * 9 + 4 * 2, 4);
    for (uint32_t reg : decode_word(w)) {
      EXPECT_EQ(reg & 0xffffu, reg >> 16);
      EXPECT_EQ(bf16_value(reg & 0xffffu), std::ldexp(e2m1_value(code), -126)) << "code " << code;
    }
  }
  // Scales: lane t = 4g + c reads rows g and g + 8 of tile c as one 16-bit word at 2t. Strip 3, lane 29 (g 7,
  // c 1): checkpoint scale rows 55 and 63, block 1.
  pack_projection(p, codes.data(), scales.data(), slot.data());
  EXPECT_EQ(slot[p.scales + 64 * 3 + 2 * 29], scales[55 * 4 + 1]);
  EXPECT_EQ(slot[p.scales + 64 * 3 + 2 * 29 + 1], scales[63 * 4 + 1]);
  std::set<int> scale_bytes;  // every scale byte of the slot holds one checkpoint scale
  for (int s = 0; s < 8; ++s) {
    for (int r = 0; r < 16; ++r) {
      for (int q = 0; q < 4; ++q) {
        const int at = 64 * s + scale_byte_offset(r, q);
        EXPECT_EQ(slot[p.scales + at], scales[(16 * s + r) * 4 + q]);
        scale_bytes.insert(at);
      }
    }
  }
  EXPECT_EQ(scale_bytes.size(), p.scale_bytes());
}

}  // namespace
}  // namespace imp::model
