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

// y [rows, n_out] (fp32, row-major) = x [rows, k] (bf16 bits) . W^T (W bf16 bits [n_out, k] row-major), fp32
// accumulation; accumulate = true adds to y instead of overwriting it.
void gemm_bf16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                    bool accumulate, cudaStream_t stream);

}  // namespace imp::cuda
