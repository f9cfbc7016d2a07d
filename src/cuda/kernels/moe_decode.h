// Decode-time MoE kernels over the expert slot pool (src/model/expert_slot.h). NVFP4 slots: W4A16 on tensor cores.
// BF16 slots (checkpoints without NVFP4): fp32 dot products over bf16 rows; same launchers, same act buffer.
// NVFP4 weights are decoded exactly to BF16 in registers (a table lookup per byte), activations are BF16
// (as the reference model stores them), products accumulate in fp32 (mma.m16n8k16), and the E4M3 block scale
// and weight_scale_2 are applied to the fp32 partial sums.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

// Router: per token row of logits [rows, experts] (experts <= 4096, 1 <= k <= 64), the top k by softmax
// probability (ties: lower expert id), weights from an fp32 softmax, optionally renormalised over the k.
// Writes experts [rows, k] (descending) and weights [rows, k]. A warp per row up to 512 experts and k <= 16 (the
// decode router's selection and softmax), else a block per row; every expert is considered.
// The choice is made on the logits (softmax is monotonic; equal logits are equal probabilities).
void launch_router_topk(const float* logits, int32_t rows, int32_t experts, int32_t k, bool renormalize,
                        int32_t* top_experts, float* top_weights, cudaStream_t stream);

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

// The decode MoE after its input projection (one token row, NVFP4 slots, every expert resident: slot = expert
// id), in two kernels instead of four (router, gate/up, down, shared expert):
//   launch_moe_decode_gate_up: one warp of every block computes the top-k of `logits` [experts] (the choices
//     of launch_router_topk), then act as launch_expert_gate_up; one extra block also computes the weights (they
//     may differ from launch_router_topk's in the last bits) and writes top_experts and top_weights [k] for the
//     second kernel.
//     1 <= k <= min(16, experts), experts <= 4096; the pool holds a slot per expert.
//   launch_moe_decode_down_hc_write: v = sum_j weights[j] * down_j . act_j (in choice order) + sigmoid(
//     shared_proj[2 I_s]) * shared_down . (silu(shared_proj[0, I_s)) * shared_proj[I_s, 2 I_s)), written into the
//     hyper-connection streams: stream_row[s * H + n] += inject[s] * v (cpu::moe_block, then
//     cpu::hyper_connection_write). shared_proj = [shared gate | shared up | shared gate logit] of the input
//     projection; shared_down bf16 [H, I_s]. The pool holds `slots` slots: the kernel reads top_experts once
//     before its PDL wait to fetch weights early (checked after the wait; a value outside [0, slots) is no
//     guess), so top_experts needs no initialisation. It must come right after launch_moe_decode_gate_up in the
//     stream, with shared_proj, inject and stream_row written by earlier kernels: gate/up lets it launch only
//     after its own PDL wait, so those are final when it starts, and it reads them before its wait.
void launch_moe_decode_gate_up(const uint8_t* pool, const model::SlotScales* scales, const model::ExpertSlotLayout& layout,
                               const float* x, const float* logits, int32_t experts, int32_t k, bool renormalize,
                               uint16_t* act, int32_t* top_experts, float* top_weights,
                               cudaStream_t stream);
void launch_moe_decode_down_hc_write(const uint8_t* pool, int32_t slots, const model::SlotScales* scales,
                                     const model::ExpertSlotLayout& layout, const uint16_t* act, const int32_t* top_experts,
                                     const float* top_weights, int32_t k, const uint16_t* shared_down,
                                     const float* shared_proj, int32_t shared_inter, const float* inject, int32_t streams,
                                     float* stream_row, cudaStream_t stream);

}  // namespace imp::cuda
