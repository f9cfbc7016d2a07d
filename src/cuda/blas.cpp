#include "cuda/blas.h"

#include "core/error.h"
#include "cuda/check.h"

namespace imp::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper

struct ThreadBlas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  ThreadBlas() {
    check_blas(cublasCreate(&handle), "cublasCreate");
    IMP_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    check_blas(cublasSetWorkspace(handle, workspace, kWorkspaceBytes), "cublasSetWorkspace");
  }
  ~ThreadBlas() {
    cublasDestroy(handle);
    cudaFree(workspace);
  }
  ThreadBlas(const ThreadBlas&) = delete;
  ThreadBlas& operator=(const ThreadBlas&) = delete;
};

}  // namespace

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLAS: {} failed: {}", what, cublasGetStatusString(status));
}

cublasHandle_t blas_handle(cudaStream_t stream) {
  thread_local ThreadBlas blas;
  check_blas(cublasSetStream(blas.handle, stream), "cublasSetStream");
  return blas.handle;
}

void gemm_bf16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                    bool accumulate, cudaStream_t stream) {
  if (rows == 0 || n_out == 0) return;
  // Column-major view: y^T [n_out, rows] = W [k, n_out]^T . x^T [k, rows].
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_blas(cublasGemmEx(blas_handle(stream), CUBLAS_OP_T, CUBLAS_OP_N, n_out, rows, k, &alpha, weight, CUDA_R_16BF, k,
                          x, CUDA_R_16BF, k, &beta, y, CUDA_R_32F, n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx (bf16 prefill GEMM)");
}

}  // namespace imp::cuda
