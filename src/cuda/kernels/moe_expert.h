// Expert kernels over the expert slot pool (src/model/expert_slot.h) for a few token rows: gate/up, then down and
// combine. NVFP4 slots: W4A16 on tensor cores; the weights are decoded exactly to BF16 in registers (a table lookup
// per byte), activations are BF16 (as the reference model stores them), products accumulate in fp32
// (mma.m16n8k16), and the E4M3 block scale and weight_scale_2 are applied to the fp32 partial sums. BF16 slots
// (checkpoints without NVFP4): fp32 dot products over bf16 rows; same launchers, same act buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

// Gate/up of the chosen experts: for row r and choice j (slot = slots[r*k + j]),
// act[(r*k + j), i] = bf16( silu(gate_i . x_r) * (up_i . x_r) ), i < padded I (zero in the padding);
// x [rows, H] fp32 (used as bf16); act [rows * k, layout.padded_intermediate].
void launch_expert_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                           const float* x, const int32_t* slots, int32_t rows, int32_t k, uint16_t* act,
                           cudaStream_t stream);

// Down and combine: y[r, n] = sum_j weights[r*k + j] * (down_n . act[(r*k + j), :]), overwriting y [rows, H],
// the k choices summed in choice order inside the kernel (deterministic; no workspace). k <= 16.
void launch_expert_down(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                        const uint16_t* act, const int32_t* slots, const float* weights, int32_t rows, int32_t k,
                        float* y, cudaStream_t stream);

}  // namespace imp::cuda
