// Every CUDA runtime call and kernel launch is checked; a failure becomes an imp::Error naming the call.
// (No fmt here: this header is included by .cu files, which nvcc compiles.)
#pragma once

#include <cuda_runtime.h>

namespace imp::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line);
[[noreturn]] void throw_invalid_launch(const char* message);
// An allocation of `bytes` that failed: out of memory says how much was asked for and how much is free (device
// memory from cudaMemGetInfo; pinned host memory names the RAM and locked-memory limits); other errors as above.
[[noreturn]] void throw_allocation_error(cudaError_t status, size_t bytes, bool pinned_host, const char* what,
                                         const char* file, int line);

inline void check_allocation(cudaError_t status, size_t bytes, bool pinned_host, const char* what, const char* file,
                             int line) {
  if (status != cudaSuccess) throw_allocation_error(status, bytes, pinned_host, what, file, line);
}

inline void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, what, file, line);
}

}  // namespace imp::cuda

#define IMP_CUDA_CHECK(call) ::imp::cuda::check((call), #call, __FILE__, __LINE__)
// cudaMalloc / cudaHostAlloc of `bytes`: out of memory becomes an error with the sizes in it.
#define IMP_CUDA_CHECK_ALLOC(call, bytes) ::imp::cuda::check_allocation((call), (bytes), false, #call, __FILE__, __LINE__)
#define IMP_CUDA_CHECK_HOST_ALLOC(call, bytes) ::imp::cuda::check_allocation((call), (bytes), true, #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad launch configurations at once.
#define IMP_CUDA_CHECK_LAUNCH() ::imp::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
