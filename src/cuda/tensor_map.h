// Tensor maps for the bulk tensor copies (TMA, cp.async.bulk.tensor) of the expert slot pool and bf16 rows: one
// instruction copies a box of several strided runs (e.g. one supertile of 8 or 16 weight strips, or 64 inputs of a
// page's rows) into shared memory.
// The map is built by the driver's cuTensorMapEncodeTiled, reached through the runtime (no libcuda link).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

// The codes (unit 512 bytes) or scales (64 bytes) of one NVFP4 projection of every slot of `pool` as a 4D
// tensor of 32-bit words [slot][strip][supertile][unit]; a box is one supertile of `box_strips` strips (strips
// past the projection read as zeros) and lands in shared memory as [box_strips][unit]. Throws imp::Error when
// the driver refuses the map (e.g. a misaligned pool).
CUtensorMap strip_tensor_map(const uint8_t* pool, int32_t num_slots, uint64_t slot_bytes, const model::SlotProjection& projection,
                             bool scales, int32_t box_strips);

// `rows` bf16 rows of `width` elements, `stride` elements apart, as a 2D tensor; a box is 64 elements (128 bytes)
// of `box_rows` (<= 256) rows and lands with the 128-byte swizzle (the layout wgmma reads with swizzle mode 1,
// swizzled_descriptor); elements past the tensor read as zeros. Throws imp::Error naming `what` when the driver
// refuses the map.
CUtensorMap bf16_rows_tensor_map(const void* data, uint64_t rows, uint32_t width, uint32_t stride, uint32_t box_rows,
                                 const char* what);
// A paged KV cache's keys or values as such a tensor.
CUtensorMap kv_tensor_map(const void* cache, uint64_t rows, uint32_t width, uint32_t box_rows);

}  // namespace imp::cuda
