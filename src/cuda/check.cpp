#include "cuda/check.h"

#include "core/error.h"

namespace imp::cuda {

void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  fail("CUDA error in {} ({}:{}): {}", what, file, line, cudaGetErrorString(status));
}

void throw_invalid_launch(const char* message) { fail("invalid kernel launch: {}", message); }

}  // namespace imp::cuda
