// The byte format of one expert in a GPU expert slot (W4A16 NVFP4, for the tensor-core decode kernels).
// Every routed expert the GPU computes with lives in a slot: gate, up and down, each repacked from the
// ModelOpt checkpoint layout into mma-fragment order, plus the three fp32 weight_scale_2 values kept
// outside the slot in a per-slot mirror. Kernels take slot indices, never expert ids: a pool with one slot
// per expert (everything resident) and a cache filled from pinned host memory run the same kernels.
//
// A projection W [N, K] (N % 16 == 0, K % 64 == 0) is cut into strips of 16 rows and supertiles of 64
// inputs. Codes: strip-major, 512 bytes per (strip, supertile); lane t of a warp reads its 16 bytes at
// t * 16: for tile q (16 inputs), the 32-bit word at t*16 + q*4 (little-endian) holds the four checkpoint bytes
// (two E2M1 values each, even k in the low nibble) of registers j = 0..3 of the A fragment of mma.m16n8k16:
// row 16*strip + t/4 + 8*(j & 1), inputs 64*st + 16*q + 2*(t%4) + 8*(j >> 1) and the next one. The word's
// 32 bits are a permutation of those bytes' bits, so that the kernels decode it with rotations and masks (9
// integer instructions for eight values instead of 15 with byte tables): register j (low half = the even
// input's value, high half = the odd one's) is
//   rotl(w, kCodeRotation<j>) & kCodeTargetMask                         for j = 0, 1, 2,
//   (rotl(w, kCodeRotation3) & kCodeTargetMask & ~kCodeLateBits) | (rotl(w, kCodeLateRotation) & kCodeLateBits)   for j = 3,
// which puts each code's magnitude bits (e1 e0 m) at bits 8..6 of its bf16 half and its sign at bit 15: the bf16
// bits of the value times 2^-126, exactly (codes with e = 0 become bf16 subnormals). No rotation of the
// target pattern tiles a word four times, hence register 3's two rotations (found by exhaustive search).
// code_bit_position gives the place of each bit. Scales: 64 bytes per (strip, supertile), byte (g*4 + q)*2 + h
// = E4M3 scale of row 16*strip + g + 8h, tile q (scale_byte_offset): the two scales lane t = 4g + c of the
// decode kernels applies (rows g and g + 8, tile c) are one 16-bit word at 2t, converted by one instruction.
// Packing permutes bits and bytes only; the values are the checkpoint's.
// Shapes that are not multiples of the tiles (tiny test models) are padded in the slot: rows to 16 and
// inputs to 64, with zero codes and zero scales, which contribute exactly nothing.
// BF16 experts (checkpoints without NVFP4, e.g. the golden fixtures) use the same slots with each
// projection stored row-major as bf16 [N, K] (K % 8 == 0 for 16-byte loads, no padding) and unit scales.
// (Plain C++17 so nvcc can include it.)
#pragma once

#include <cstddef>
#include <cstdint>

namespace imp::model {

enum class SlotFormat : int32_t { kNvfp4, kBf16 };

struct SlotProjection {
  SlotFormat format = SlotFormat::kNvfp4;
  int32_t rows = 0;  // N, padded to 16 (NVFP4)
  int32_t cols = 0;  // K, padded to 64 (NVFP4)
  int32_t real_rows = 0;  // N and K as the checkpoint has them
  int32_t real_cols = 0;
  uint64_t codes = 0;   // byte offset of the codes (NVFP4) or bf16 weights in the slot
  uint64_t scales = 0;  // byte offset of the scales in the slot (NVFP4 only)
  constexpr int32_t supertiles() const { return cols / 64; }
  constexpr uint64_t code_bytes() const {
    return format == SlotFormat::kNvfp4 ? static_cast<uint64_t>(rows) * cols / 2 : static_cast<uint64_t>(rows) * cols * 2;
  }
  constexpr uint64_t scale_bytes() const { return format == SlotFormat::kNvfp4 ? static_cast<uint64_t>(rows) * cols / 16 : 0; }
};

struct ExpertSlotLayout {
  SlotFormat format = SlotFormat::kNvfp4;
  int32_t hidden = 0;        // H as the model has it
  int32_t intermediate = 0;  // I as the model has it
  int32_t padded_hidden = 0;        // H in the slot (NVFP4: multiple of 64)
  int32_t padded_intermediate = 0;  // I in the slot; the stride of the act buffer
  SlotProjection gate, up, down;  // gate/up [I, H], down [H, I]
  uint64_t slot_bytes = 0;

  // Throws imp::Error (from the .cpp) when H or I is not a multiple of 16 (NVFP4 scale blocks) or 8 (BF16).
  static ExpertSlotLayout make(int32_t hidden, int32_t intermediate, SlotFormat format = SlotFormat::kNvfp4);
};

// The code bit layout inside a packed word (see the top of this file).
constexpr uint32_t kCodeTargetMask = 0x81C081C0u;  // bits 6-8 and 15 of both bf16 halves
constexpr uint32_t kCodeLateBits = 0x01000100u;    // register 3's bits 8 and 24 come from the second rotation
// Rotations of registers 0-3 (scalars: device code reads them), and register 3's second one.
constexpr int kCodeRotation0 = 0, kCodeRotation1 = 4, kCodeRotation2 = 10, kCodeRotation3 = 6, kCodeLateRotation = 14;

// The bit of a packed word that holds bit `bit` (0 = m, 1 = e0, 2 = e1, 3 = sign) of the code in register
// `reg`'s half `half` (0 = even input).
constexpr int code_bit_position(int reg, int half, int bit) {
  const int target = 16 * half + (bit == 3 ? 15 : 6 + bit);
  const bool late = reg == 3 && ((kCodeLateBits >> target) & 1u) != 0;
  const int rotation = late ? kCodeLateRotation
                            : reg == 0 ? kCodeRotation0 : reg == 1 ? kCodeRotation1 : reg == 2 ? kCodeRotation2 : kCodeRotation3;
  return (target - rotation + 32) % 32;
}

// The byte of a (strip, supertile) scale block that holds row r (0-15) of the strip, tile q (0-3).
constexpr int scale_byte_offset(int r, int q) { return ((r % 8) * 4 + q) * 2 + r / 8; }

// Per-slot fp32 weight_scale_2 of gate, up and down.
struct SlotScales {
  float gate = 0, up = 0, down = 0, unused = 0;
};

// Repacks one projection from checkpoint layout (codes [N, K/2], scales [N, K/16]) into its slot region.
void pack_projection(const SlotProjection& projection, const uint8_t* codes, const uint8_t* scales, uint8_t* slot);
// Copies one BF16 projection [N, K] (row-major bits) into its slot region.
void pack_projection_bf16(const SlotProjection& projection, const uint16_t* weights, uint8_t* slot);

}  // namespace imp::model
