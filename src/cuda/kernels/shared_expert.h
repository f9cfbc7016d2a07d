// The shared expert's element-wise steps (cpu::moe_block: y += sigmoid(gate_logit) * W_down (silu(gate) * up)).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// Prefill: act [rows, inter] = sigmoid(gate_logit[r]) * (silu(gate[r, i]) * up[r, i]); gate and up rows start every
// in_stride floats. The gate folded into act lets the down projection add straight into the routed experts' output
// (W_down (s act) = s W_down act up to fp32 rounding).
void launch_swiglu_gated(const float* gate, const float* up, int32_t in_stride, const float* gate_logit, int32_t rows,
                         int32_t inter, float* act, cudaStream_t stream);

// Decode (one row), the whole tail of the MoE block in one kernel: act = silu(gate) * up on the fly,
// v = y_experts + sigmoid(gate_logit) * (W_down act), then the hyper-connection write
// stream_row[s * d + n] += inject[s] * v. proj = [gate (inter) | up (inter) | gate_logit]; down [d, inter] bf16.
// inter % 8 == 0.
void launch_shared_expert_hc_write(const uint16_t* down, const float* proj, int32_t inter, int32_t d,
                                   const float* y_experts, const float* inject, int32_t streams, float* stream_row,
                                   cudaStream_t stream);

}  // namespace imp::cuda
