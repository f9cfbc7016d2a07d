// The fused decode MoE (one token row, NVFP4 slots) in two kernels; the same arithmetic as moe_expert.h's
// kernels with the router (moe_router.h) inside the first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/expert_slot.h"

namespace imp::cuda {

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
