// Gated DeltaNet prefill for T tokens of one sequence: the causal conv over [conv_state ++ T rows] and the
// chunked (WY, C = 64) delta rule of cpu::gated_delta_net(chunked = true), then the gated RMSNorm, in fp32.
// Shapes and weights as the decode step (gated_delta_net.h).
//
// launch_gdn_conv_prefill: out[t, c] = silu(sum_{j<K} w[c, j] * P[t - (K-1) + j, c]) where P is
//   [conv_state (K-1 rows) ++ mixed (tokens rows)]; conv_state [K-1, channels] then holds the last K-1 rows of
//   P. mixed, out [tokens, channels] fp32; out must not alias mixed. 2 <= K <= 8.
// launch_gdn_chunked_prefill: per value head h (key head h / (value_heads / key_heads)), with q, k from
//   conv_out (L2-normalised, q also by 1/sqrt(key_dim)), v, beta = sigmoid(b), g = -exp(A_log) *
//   softplus(a + dt_bias): chunk by chunk, gamma = inclusive cumsum of g in the chunk,
//   L = I + strictlower(diag(beta) K K^T * Gamma), U = L^-1 diag(beta) V, W = L^-1 diag(beta e^gamma) K,
//   V' = U - W S, O = (Q e^gamma) S + ((Q K^T) * Gamma) V', S <- e^gamma_C S + (K e^(gamma_C - gamma))^T V';
//   then out = gated_norm(O, z), written as its two bf16 terms out_hi = bf16(out), out_lo = bf16(out - out_hi)
//   (launch_split_bf16's: the out projection's input), or instead, with out16, only its fp16 term
//   fp16_rn((out_hi + out_lo) * out16_scale) (launch_f16_terms's bits; out_hi and out_lo may then be null).
//   recurrent [value_heads, key_dim, value_dim] fp32 is read and updated in place; conv_out [tokens, channels], z [tokens, value_heads * value_dim], b, a [tokens,
//   value_heads]; out_hi, out_lo [tokens, value_heads * value_dim] bf16 bits. key_dim and value_dim multiples of
//   16, at most 128.
//   workspace: gdn_prefill_workspace_bytes(shape, tokens) bytes (~ tokens * value_heads * (4 * 128 + 64 + 2 * 128)
//   * 4 bytes at dims 128: 654 MB at 4096 tokens, 48 heads), 16-byte aligned. No allocation, no host synchronisation.
//   Kernels: per (chunk, head) the state-independent parts (L^-1 by blocked forward substitution, U, W,
//   Q e^gamma, K e^(gamma_C - gamma), (Q K^T) * Gamma) in parallel; then per (head, 64-column slice of the
//   state) the sequential pass over chunks (V' = U - W S and the state update only, saving the state each chunk
//   starts from); then per (64-column slice, chunk, head) O from the saved states and V', the slices of a
//   (chunk, head) one cluster for the gated norm's row sums. The matrix
//   products run on tensor cores as 3xBF16 (each operand as two bf16 terms, ~2^-17 per product, fp32
//   accumulation).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/gated_delta_net.h"

namespace imp::cuda {

void launch_gdn_conv_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w, const float* mixed,
                             float* conv_state, int32_t tokens, float* out, cudaStream_t stream);

size_t gdn_prefill_workspace_bytes(const GatedDeltaNetShape& shape, int32_t tokens);

void launch_gdn_chunked_prefill(const GatedDeltaNetShape& shape, const GatedDeltaNetWeightsDevice& w,
                                const float* conv_out, const float* z, const float* b, const float* a,
                                float* recurrent, int32_t tokens, void* workspace, size_t workspace_bytes,
                                uint16_t* out_hi, uint16_t* out_lo, cudaStream_t stream, uint16_t* out16 = nullptr,
                                float out16_scale = 0.0f);

}  // namespace imp::cuda
