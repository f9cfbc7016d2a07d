// The shared expert's element-wise steps for decode rows (its projections run on the dense GEMV):
//   act = silu(gate) * up;   y += sigmoid(gate_logit) * shared_out   (cpu::moe_block).
// Inputs are row-strided so one fused projection [router | gate | up | gate_logit] can feed them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// act [rows, inter] = silu(gate[r, i]) * up[r, i]; gate and up rows start every in_stride floats.
void launch_swiglu(const float* gate, const float* up, int32_t in_stride, int32_t rows, int32_t inter, float* act,
                   cudaStream_t stream);

// y [rows, d] += sigmoid(gate_logit[r * logit_stride]) * shared [rows, d].
void launch_add_sigmoid_gated(const float* shared, const float* gate_logit, int32_t logit_stride, int32_t rows,
                              int32_t d, float* y, cudaStream_t stream);

// Decode (one row), the whole tail of the MoE block in one kernel: act = silu(gate) * up on the fly,
// v = y_experts + sigmoid(gate_logit) * (W_down act), then the hyper-connection write
// stream_row[s * d + n] += inject[s] * v. proj = [gate (inter) | up (inter) | gate_logit]; down [d, inter] bf16.
// inter % 8 == 0.
void launch_shared_expert_hc_write(const uint16_t* down, const float* proj, int32_t inter, int32_t d,
                                   const float* y_experts, const float* inject, int32_t streams, float* stream_row,
                                   cudaStream_t stream);

}  // namespace imp::cuda
