#include "cuda/check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace imp::cuda {

void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  fail("CUDA error in {} ({}:{}): {}", what, file, line, cudaGetErrorString(status));
}

void throw_invalid_launch(const char* message) { fail("invalid kernel launch: {}", message); }

void throw_allocation_error(cudaError_t status, size_t bytes, bool pinned_host, const char* what, const char* file,
                            int line) {
  if (status != cudaErrorMemoryAllocation) throw_cuda_error(status, what, file, line);
  cudaGetLastError();  // not sticky: clear it, so the caller's error is the only one reported
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double wanted = static_cast<double>(bytes) / kGiB;
  if (pinned_host) {
    throw OutOfMemory(fmt::format("out of pinned host memory: {} ({}:{}) needs {:.2f} GiB of page-locked RAM; the "
                                  "machine's free RAM or its locked-memory limit (ulimit -l, a container's memory "
                                  "limit) is too small for it",
                                  what, file, line, wanted),
                      true);
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  throw OutOfMemory(fmt::format("out of GPU memory: {} ({}:{}) needs {:.2f} GiB, {:.2f} GiB of the GPU's {:.2f} GiB are "
                                "free",
                                what, file, line, wanted, static_cast<double>(free_bytes) / kGiB,
                                static_cast<double>(total_bytes) / kGiB),
                    false);
}

}  // namespace imp::cuda
