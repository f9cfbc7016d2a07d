// The expert slot format: packing is a byte permutation into mma.m16n8k16 A-fragment order.
#include <gtest/gtest.h>

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

TEST(ExpertSlot, PackingIsAPermutationInFragmentOrder) {
  const ExpertSlotLayout l = ExpertSlotLayout::make(128, 64);
  const SlotProjection& p = l.down;  // [128, 64]: 8 strips x 1 supertile
  std::vector<uint8_t> codes(p.code_bytes()), scales(p.scale_bytes());
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / 256);
  std::vector<uint8_t> slot(l.slot_bytes, 0xEE);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i);
  pack_projection(p, codes.data(), scales.data(), slot.data());
  const uint8_t* out = slot.data() + p.codes;
  // Strip 1, lane 5 (row group 1, column pair 2), tile 2, register 3 (row +8, input +8):
  // row 16 + 1 + 8 = 25, input 16*2 + 2*1 + 8 = 42 -> checkpoint byte 25 * 32 + 21.
  EXPECT_EQ(out[512 * 1 + 5 * 16 + 2 * 4 + 3], codes[25 * 32 + 21]);
  // Strip 0, lane 0, tile 0, register 0: row 0, inputs 0-1.
  EXPECT_EQ(out[0], codes[0]);
  // Scales: strip 3, row 7, tile 2 -> checkpoint scale row 55, block 2.
  EXPECT_EQ(slot[p.scales + 64 * 3 + 7 * 4 + 2], scales[55 * 4 + 2]);

  // Every checkpoint byte lands exactly once: mark 256 bytes at a time with distinct values and a mask.
  for (size_t i = 0; i < codes.size(); i += 256) {
    std::vector<uint8_t> marked(codes.size(), 0);
    for (size_t j = i; j < i + 256; ++j) marked[j] = static_cast<uint8_t>(j - i);
    std::vector<uint8_t> packed(l.slot_bytes, 0);
    std::vector<uint8_t> is_marked(codes.size(), 0);
    for (size_t j = i; j < i + 256; ++j) is_marked[j] = 1;
    std::vector<uint8_t> packed_mask(l.slot_bytes, 0);
    pack_projection(p, marked.data(), scales.data(), packed.data());
    pack_projection(p, is_marked.data(), scales.data(), packed_mask.data());
    std::set<int> values;
    for (uint64_t b = 0; b < p.code_bytes(); ++b) {
      if (packed_mask[p.codes + b]) values.insert(packed[p.codes + b]);
    }
    EXPECT_EQ(values.size(), 256u) << "block " << i;
  }
}

}  // namespace
}  // namespace imp::model
