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
// They live in the caller's scratch (rows * k floats) until the next split into it. lo8 (optional): the low term
// again as E4M3 with one scale per row (launch_low_term_fp8), for weights that have an FP8 copy.
// x16 (optional): x again as one fp16 term, times a power of two x16_scale chosen from a bound on |x| so that
// nothing overflows (launch_f16_terms), for weights that have an fp16 copy.
struct SplitActivations {
  const uint16_t* hi = nullptr;
  const uint16_t* lo = nullptr;
  int32_t rows = 0, k = 0;
  const uint8_t* lo8 = nullptr;
  const float* lo8_scales = nullptr;  // [rows]
  const uint16_t* x16 = nullptr;
  float x16_scale = 1.0f;
};

// fp16 rows: row r ~ data[r, :] / scale, with scale a power of two (launch_f16_rows).
struct F16Rows {
  const uint16_t* data = nullptr;
  float scale = 1.0f;
};

// E4M3 rows with one fp32 scale per row: row r ~ data[r, :] * scales[r].
struct Fp8Rows {
  const uint8_t* data = nullptr;
  const float* scales = nullptr;
};

// bf16 rows [rows, cols] -> E4M3 rows with one scale per row, the scale chosen so that the row's largest
// magnitude maps to 448 (E4M3's largest): scale = amax / 448 (1 for an all-zero row),
// out = e4m3_rn_satfinite(v * (448 / amax)). out [rows, cols] bytes, scales [rows].
void launch_quantize_rows_e4m3(const uint16_t* in, int32_t rows, int32_t cols, uint8_t* out, float* scales,
                               cudaStream_t stream);

// out = fp16_rn(in * scale) for `count` bf16 values (scale a power of two: exact while the products stay in fp16's
// normal range; |in| * scale must stay below 65504, which the caller's scale choice guarantees).
void launch_f16_rows(const uint16_t* in, size_t count, float scale, uint16_t* out, cudaStream_t stream);
// *out = max |v + offset| over `count` bf16 values v (device scalar; 0 for none), for the scales above.
void launch_bf16_abs_max(const uint16_t* in, size_t count, float offset, float* out, cudaStream_t stream);
// *out = max over rows of sum_c |v[r, c]| for a bf16 matrix [rows, cols] (device scalar), for the scales above.
void launch_bf16_row_abs_sum_max(const uint16_t* in, int32_t rows, int32_t cols, float* out, cudaStream_t stream);
// x [rows, k] fp32 as its fp16 term only: x16 = fp16_rn(x * scale) in `out` (no split terms: for GEMMs whose
// weights have an fp16 copy).
SplitActivations launch_f16_values(const float* x, int32_t rows, int32_t k, float scale, uint16_t* out, cudaStream_t stream);
// x with x16 = fp16_rn((hi + lo) * scale) in `out` (rows * k values; they live until the next conversion into it).
SplitActivations launch_f16_terms(const SplitActivations& x, float scale, uint16_t* out, cudaStream_t stream);

// x with its low term also as E4M3 rows (out: rows * k bytes, scales: rows floats; they live until the next
// quantization into them).
SplitActivations launch_low_term_fp8(const SplitActivations& x, uint8_t* out, float* scales, cudaStream_t stream);
SplitActivations launch_split_bf16(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream);
// The same terms side by side: [rows, 2k] bf16 bits, row t = [hi_t | lo_t], in the scratch. One GEMM of this
// against weight rows repeated twice ([W | W], 2k wide) is y = W.hi + W.lo without a second pass over y.
const uint16_t* launch_split_bf16_rows(const float* x, int32_t rows, int32_t k, float* scratch, cudaStream_t stream);

// y [rows, n_out] = x . W^T (W bf16 bits [n_out, k] row-major, y fp32 row-major), from the split terms;
// accumulate = true adds to y instead. With weight8 (W as E4M3 rows, launch_quantize_rows_e4m3) and x.lo8 the low
// term runs as an FP8 GEMM where cuBLASLt takes the shape (gemm_fp8_rows_accumulate; per-row scales on both
// sides; otherwise the bf16 low term): ~1.5x the bf16 term's speed for a low term within ~2^-4 relative instead
// of ~2^-9 (the whole product ~2^-12 instead of ~2^-16 of its scale). On the golden fixtures, with the copies of
// DeviceModel::build_low_term_weights: at most 1.76e-3 of HF (1.59e-3 without), every greedy token the same.
// With weight16 (W as fp16 rows) and x.x16 the product is instead one fp16 GEMM (W16 . x16, fp32 accumulation,
// divided by both scales): x to ~2^-12 of each value instead of ~2^-16 (hi + lo) or ~2^-13 (hi + FP8 lo), at the
// cost of one term. With the copies of DeviceModel::build_low_term_weights the golden fixtures stay within 2.2e-3
// of HF on the H200, greedy unchanged; long_sparse has a near-tie that fp16-level errors cross in some choices of
// which GEMMs take fp16 (up to 1e-2 in the CPU emulation, bench/results/2026-12-02_cpu_precision_emulation_f16.txt).
// y's rows are ldy apart (0: n_out).
void launch_gemm_bf16_split(const SplitActivations& x, const uint16_t* weight, int32_t n_out, float* y,
                            cudaStream_t stream, bool accumulate = false, Fp8Rows weight8 = {}, F16Rows weight16 = {},
                            int32_t ldy = 0);

// Both steps for a one-off input.
void launch_gemm_bf16_split(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                            float* scratch, cudaStream_t stream);

}  // namespace imp::cuda
