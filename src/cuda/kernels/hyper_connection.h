// Hyper-connection read and write on the GPU, the math of cpu::hyper_connection_read/_write:
// read:  N = grouped (1+w) RMSNorm(H); l = silu((N W_down^T) / S); m = sigmoid(l W_up^T);
//        x_j = mean_s m[s, j] * N[s, j]; inject_s = 2 sigmoid((N W_inject^T)_s / S)
// write: H[s, j] += inject_s * y_j
// Prefill runs the norm and the down and inject projections on the dense kernels, the up projection with the mix in
// one kernel where the shape allows (launch_hc_up_mix; otherwise a dense GEMM and launch_hc_mix), and these
// element-wise steps; decode runs the fused read kernels below and writes the streams from the output projections
// (dense.h, shared_expert.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/gemm_bf16_split.h"

namespace imp::cuda {

// raw_low [rows, rank] and raw_inject [rows, injects] (the down and inject projections of N) -> low [rows, rank] =
// silu(raw_low / S) and, when injects = S, inject [rows, S] = 2 sigmoid(raw_inject / S).
void launch_hc_activations(const float* raw_low, const float* raw_inject, int32_t rows, int32_t rank, int32_t injects,
                           int32_t streams, float* low, float* inject, cudaStream_t stream);
// x [rows, d] = mean over the S streams of sigmoid(mix) * N; mix fp32 [rows, S*d], N [rows, S*d] as the two bf16
// terms of launch_split_bf16 (N = hi + lo to ~2^-17 relative: the terms the down projection reads, so prefill keeps
// no fp32 copy of N). Also x's own split terms (as launch_split_bf16 would make them) into x_scratch (rows * d
// floats), returned: the input of the GEMMs after the read. x may be null when only the terms are read (prefill's
// GEMMs): 4 of the kernel's 40 bytes per output not written.
SplitActivations launch_hc_mix(const float* mix, const SplitActivations& normed, int32_t streams, int32_t d, float* x,
                               float* x_scratch, cudaStream_t stream);
// Prefill: the up projection and the mix in one kernel where hc_up_mix_fits: launch_hc_mix's outputs from the
// GEMM's inputs, x = mean_s sigmoid(low_terms . up_s^T) * N_s with the sums over [hi | lo] (low_terms [rows, 2 rank],
// launch_split_bf16_rows) against the first rank elements of each up row (rows up_stride elements apart), fp32
// accumulation. m, the [rows, S*d] fp32 GEMM output, is never written. With x16 (8-byte aligned, rows * d) it also
// writes x's fp16 term from its split terms as launch_f16_terms does (the same bits), returned in the terms.
bool hc_up_mix_fits(int32_t streams, int32_t d, int32_t rank);  // S = 4, d % 64 == 0, rank % 8 == 0, rank <= 320
SplitActivations launch_hc_up_mix(const uint16_t* low_terms, const uint16_t* up, int32_t up_stride, int32_t rank,
                                  const SplitActivations& normed, int32_t streams, int32_t d, float* x,
                                  float* x_scratch, cudaStream_t stream, uint16_t* x16 = nullptr, float x16_scale = 0.0f);
// Decode (one row), the whole read in two kernels instead of six:
//   launch_hc_read_down: the grouped (1 + w) RMSNorm folded into the GEMV of down_inject [rank (+ S), S*d]
//     (each output sums per group, then scales by the group's rsqrt), activations applied: low[i < rank] =
//     silu(v / S), low[rank + s] = 2 sigmoid(v / S) (the inject weights, when rows_out = rank + S); also
//     writes inv_rms [S] for the second kernel.
//   launch_hc_read_up_mix: x[j] = mean_s sigmoid(up[s*d + j] . low[0..rank)) * normed[s, j].
// d % 8 == 0, rank % 8 == 0, S <= 8.
void launch_hc_read_down(const float* stream_row, const uint16_t* norm_weight, const uint16_t* down_inject, int32_t rows_out,
                         int32_t rank, int32_t streams, int32_t d, float eps, float* low, float* inv_rms, cudaStream_t stream);
// up: [S*d, rank] with rows up_stride elements apart (the engine stores each row twice, see
// HyperConnectionDevice::up).
void launch_hc_read_up_mix(const float* stream_row, const uint16_t* norm_weight, const float* inv_rms, const uint16_t* up,
                           int32_t up_stride, const float* low, int32_t rank, int32_t streams, int32_t d, float* x,
                           cudaStream_t stream);

// stream [rows, S*d] += inject[row, s] * y[row, j].
void launch_hc_write(const float* y, const float* inject, int32_t rows, int32_t streams, int32_t d, float* stream_rows,
                     cudaStream_t stream);

// Prefill: the write above, then the next read's grouped (1 + w) RMSNorm N of the streams, N's split bf16 terms
// into split_scratch (as launch_split_bf16) and, when inject_weight is given (S rows of S*d, the read's
// block_inject_weight), its inject logits before their activation, raw_inject [rows, S] = N . inject_weight^T
// (fp32 sums of the fp32 N), in one pass over each row instead of four kernels. The streams and the split terms
// are bit for bit launch_hc_write, launch_rms_norm (groups of d; its row kernel, which it takes above 64 (row,
// group) items: few wide rows go to its cluster kernel, whose sums may differ in the last bit) and
// launch_split_bf16 in sequence. d % 4 == 0, S <= 8; y, stream_rows 16-byte aligned, norm_weight and
// inject_weight 8-byte aligned.
SplitActivations launch_hc_write_norm_split(const float* y, const float* inject, int32_t rows, int32_t streams,
                                            int32_t d, float* stream_rows, const uint16_t* norm_weight, float eps,
                                            const uint16_t* inject_weight, float* raw_inject, float* split_scratch,
                                            cudaStream_t stream);

}  // namespace imp::cuda
