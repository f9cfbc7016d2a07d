// Every CUDA runtime call and kernel launch is checked; a failure becomes an imp::Error naming the call.
// (No fmt here: this header is included by .cu files, which nvcc compiles.)
#pragma once

#include <cuda_runtime.h>

namespace imp::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line);
[[noreturn]] void throw_invalid_launch(const char* message);

inline void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, what, file, line);
}

}  // namespace imp::cuda

#define IMP_CUDA_CHECK(call) ::imp::cuda::check((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad launch configurations at once.
#define IMP_CUDA_CHECK_LAUNCH() ::imp::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
