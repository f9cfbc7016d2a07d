// cuBLAS for the prefill GEMMs: one handle per host thread, created on first use with a fixed workspace
// (so cuBLAS itself never allocates afterwards), bound to the caller's stream per call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// The calling thread's handle, set to `stream`.
cublasHandle_t blas_handle(cudaStream_t stream);

// Throws imp::Error naming `what` when a cuBLAS call fails.
void check_blas(cublasStatus_t status, const char* what);

// y [rows, n_out] (fp32, row-major, rows ldy >= n_out apart; 0: n_out) = x [rows, k] (bf16 bits) . W^T (W bf16
// bits [n_out, k] row-major), fp32 accumulation; accumulate = true adds to y instead of overwriting it.
void gemm_bf16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                    bool accumulate, cudaStream_t stream, int32_t ldy = 0);

// The same with fp16 inputs (x and W fp16 bits) and y = alpha * x . W^T (accumulate: y += ...).
void gemm_f16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float alpha,
                   float* y, bool accumulate, cudaStream_t stream, int32_t ldy = 0);

// y [rows, n_out] (rows ldy apart) += (x8 [rows, k] * x_scales[row]) . (w8 [n_out, k] * w_scales[n])^T: E4M3
// inputs with one fp32 scale per row on both sides (cuBLASLt outer-vector scales), fp32 accumulation and output.
// Returns false, and does nothing, for what cuBLASLt cannot take that way: k % 16 != 0, a pointer not 16-byte
// aligned, or a shape without such an algorithm (e.g. a one-row weight); the caller then runs the product another way.
bool gemm_fp8_rows_accumulate(const uint8_t* x8, const float* x_scales, const uint8_t* w8, const float* w_scales,
                              int32_t rows, int32_t n_out, int32_t k, float* y, cudaStream_t stream, int32_t ldy = 0);

}  // namespace imp::cuda
