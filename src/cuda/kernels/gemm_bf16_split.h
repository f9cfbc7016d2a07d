// Dense prefill GEMM with fp32-grade activations: x is carried as two bf16 terms, hi = bf16(x) and
// lo = bf16(x - hi) (about 16 significant bits), and y = W.hi + W.lo with two cuBLAS tensor-core GEMMs
// (bf16 inputs, fp32 accumulation, the second accumulating into y). Why: the golden fixtures are fp32 models whose routers and QSA selections flip on
// near-ties when every projection sees bf16-rounded activations (measured: up to 0.16 relative logit error on
// 4 of 8 fixtures with plain bf16 activations; CPU emulation of this split stays within 2.3e-3 on all 8).
// The decode GEMVs use fp32 activations, so prefill and decode now agree to the same precision.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// The two bf16 terms of x [rows, k] (fp32, row-major), made once for every GEMM that reads the same input.
// They live in the caller's scratch (rows * k floats) until the next split into it.
struct SplitActivations {
  const uint16_t* hi = nullptr;
  const uint16_t* lo = nullptr;
  int32_t rows = 0, k = 0;
};
SplitActivations launch_split_bf16(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream);
// The same terms side by side: [rows, 2k] bf16 bits, row t = [hi_t | lo_t], in the scratch. One GEMM of this
// against weight rows repeated twice ([W | W], 2k wide) is y = W.hi + W.lo without a second pass over y.
const uint16_t* launch_split_bf16_rows(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream);

// y [rows, n_out] = x . W^T (W bf16 bits [n_out, k] row-major, y fp32 row-major), from the split terms;
// accumulate = true adds to y instead.
void launch_gemm_bf16_split(const SplitActivations& x, const uint16_t* weight, int32_t n_out, float* y,
                            cudaStream_t stream, bool accumulate = false);

// Both steps for a one-off input.
void launch_gemm_bf16_split(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                            float* scratch, cudaStream_t stream);

}  // namespace imp::cuda
