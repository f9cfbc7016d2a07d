// Routed experts for many tokens of prefill (grouped W4A16 GEMM on tensor cores over the expert slot pool).
//
// Contract (launch_moe_prefill):
//   y[t, n] = sum_{j < k} weights[t*k + j] * sum_i down_s[n, i] * act_s(t)[i],  s = slots[t*k + j],
//   act_s(t)[i] = bf16( silu(gate_s[i] . bf16(x_t)) * (up_s[i] . bf16(x_t)) )
//   for t < tokens, n < layout.hidden; y fp32 [tokens, hidden] is overwritten. x_bf16 [tokens, hidden] = bf16(x) as
//   bits (16-byte aligned; the read's x split terms already hold it: their high term), slots/weights [tokens, k]
//   (slot indices into the pool, 0 <= slot < num_slots; e.g. launch_router_topk's experts when the pool holds every
//   expert), scales [num_slots].
//   NVFP4 slots only (BF16 slots, e.g. the fixtures, go to the row kernels; a BF16 layout throws): E2M1 x E4M3 is
//   formed exactly in bf16 (at most 6 significant bits), products with bf16 x are exact, sums fp32 (wgmma
//   m64nNk16 with the weights as the register operand and every pair of a tile as N), weight_scale_2 applied to
//   the sums.
//   The k choices of a token are summed in choice order from fp32 per-choice partials: deterministic (the
//   bucketing uses atomics, but a token's result never depends on which tile it lands in).
//   Steps, all on `stream`, no host synchronisation, no allocation: count (token, choice) pairs per slot,
//   plan tiles of <= 128 pairs per slot (a slot's pairs split evenly), scatter, gather each tile's activations into
//   its image (the layout the GEMM's stages take whole), gate/up (+SwiGLU, into down's images), down, combine. The
//   GEMMs' weights come by bulk tensor copies (tensor_map.h): the pool 16-byte aligned, slot_bytes % 16 == 0.
//   workspace: moe_prefill_workspace_bytes(...) bytes, 256-byte aligned; about tokens*k*(hidden*4 +
//   padded_intermediate*2) bytes plus 15 rows of image padding per tile (the fp32 per-choice partials dominate:
//   420 MB at 4096 tokens, k 10, hidden 2560; gate/up's activation images share their bytes). tokens <= 65535.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

size_t moe_prefill_workspace_bytes(const model::ExpertSlotLayout& layout, int32_t tokens, int32_t k, int32_t num_slots);

void launch_moe_prefill(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                        const uint16_t* x_bf16, const int32_t* slots, const float* weights, int32_t tokens, int32_t k,
                        int32_t num_slots, void* workspace, size_t workspace_bytes, float* y, cudaStream_t stream);

}  // namespace imp::cuda
