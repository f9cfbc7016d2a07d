// Dense decode kernels on BF16 weights with fp32 activations: GEMV for projections and the LM head,
// and the (1 + w) RMSNorm used by every norm of the model except the GDN gated norm.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// y[r, n] = sum_k W[n, k] * x[r, k] for W [N, K] bf16 (row-major), x [rows, K] fp32, y [rows, N] fp32.
// K % 8 == 0 (16-byte loads); rows <= 8 (decode batches; prefill uses the GEMM path).
void launch_gemv_bf16(const uint16_t* weight, const float* x, int32_t rows, int32_t n, int32_t k, float* y,
                      cudaStream_t stream);

// Decode (one row) output projection written into the hyper-connection streams instead of to a vector:
// stream_row[s * n + i] += inject[s] * (W (x * gate))[i] for s < streams (cpu::hyper_connection_write of W applied to
// x times gate elementwise: the mixer's output gate, made beside it, GDN's act(z) or attention's sigmoid(gate)).
void launch_gemv_bf16_hc_write(const uint16_t* weight, const float* x, const float* gate, int32_t n, int32_t k,
                               const float* inject, int32_t streams, float* stream_row, cudaStream_t stream);

// Decode (one row) attention in-projection [q_h | gate_h per head, then the rest]: every output but the gate halves,
// at their places in y (the gate halves of y untouched); and sigmoid of the gate halves alone into act [heads *
// head_dim], for the output projection to multiply in.
void launch_gemv_bf16_without_gates(const uint16_t* weight, const float* x, int32_t n, int32_t k, int32_t heads,
                                    int32_t head_dim, float* y, cudaStream_t stream);
void launch_gemv_bf16_gate_halves(const uint16_t* weight, const float* x, int32_t k, int32_t heads, int32_t head_dim,
                                  float* act, cudaStream_t stream);

// Grouped (1 + w) RMSNorm: each row of `width` is normalised in groups of `group`, w spans the width (bf16).
// In-place allowed (x == y). Few rows of wide groups (decode): a cluster of 4 blocks per group.
void launch_rms_norm(const float* x, const uint16_t* weight, int32_t rows, int32_t width, int32_t group, float eps,
                     float* y, cudaStream_t stream);

}  // namespace imp::cuda
