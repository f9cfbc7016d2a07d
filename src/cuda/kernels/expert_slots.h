// The expert slot pool: every routed expert the GPU computes with lives in a slot, one whole expert per
// slot: the packed E2M1 codes and E4M3 block scales of gate, up and down, each segment 16-byte aligned,
// plus a per-slot mirror of the three fp32 weight_scale_2 values. Kernels take slot indices, never
// expert ids, so a pool with one slot per expert (everything resident) and a cache of slots filled from
// host memory run the same kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

struct ExpertSlotLayout {
  int32_t hidden = 0;        // H: input of gate/up, output of down
  int32_t intermediate = 0;  // I
  // Byte offsets inside a slot.
  uint64_t gate_codes = 0, up_codes = 0, down_codes = 0;     // [I, H/2], [I, H/2], [H, I/2]
  uint64_t gate_scales = 0, up_scales = 0, down_scales = 0;  // [I, H/16], [I, H/16], [H, I/16]
  uint64_t slot_bytes = 0;

  static ExpertSlotLayout make(int32_t hidden, int32_t intermediate) {
    ExpertSlotLayout l;
    l.hidden = hidden;
    l.intermediate = intermediate;
    uint64_t offset = 0;
    auto take = [&offset](uint64_t bytes) {
      const uint64_t at = offset;
      offset += (bytes + 15) / 16 * 16;
      return at;
    };
    const uint64_t h = static_cast<uint64_t>(hidden), i = static_cast<uint64_t>(intermediate);
    l.gate_codes = take(i * h / 2);
    l.up_codes = take(i * h / 2);
    l.down_codes = take(h * i / 2);
    l.gate_scales = take(i * h / 16);
    l.up_scales = take(i * h / 16);
    l.down_scales = take(h * i / 16);
    l.slot_bytes = offset;
    return l;
  }
};

// Per-slot fp32 weight_scale_2 of gate, up and down.
struct SlotScales {
  float gate, up, down, unused;
};

}  // namespace imp::cuda
