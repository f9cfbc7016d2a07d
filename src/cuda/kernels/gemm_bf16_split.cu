#include "cuda/kernels/gemm_bf16_split.h"

#include <cuda_bf16.h>

#include "cuda/check.h"
#include "cuda/kernels/gemm_bf16.h"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

// residual = x - bf16_rn(x): the GEMM rounds x to nearest-even as it loads it, so hi + residual == x exactly.
__global__ void bf16_residual_kernel(const float* x, size_t count, float* residual) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count; i += step) {
    residual[i] = x[i] - __bfloat162float(__float2bfloat16_rn(x[i]));
  }
}

__global__ void add_kernel(const float* partial, size_t count, float* y) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count; i += step) y[i] += partial[i];
}

unsigned blocks_for(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 132 * 16 ? (blocks > 0 ? blocks : 1) : 132 * 16);
}

}  // namespace

void launch_gemm_bf16_split(const float* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                            float* residual, float* partial, cudaStream_t stream) {
  if (rows == 0) return;
  const size_t in_count = static_cast<size_t>(rows) * static_cast<size_t>(k);
  const size_t out_count = static_cast<size_t>(rows) * static_cast<size_t>(n_out);
  bf16_residual_kernel<<<blocks_for(in_count), kThreads, 0, stream>>>(x, in_count, residual);
  IMP_CUDA_CHECK_LAUNCH();
  launch_gemm_bf16(x, weight, rows, n_out, k, y, stream);
  launch_gemm_bf16(residual, weight, rows, n_out, k, partial, stream);
  add_kernel<<<blocks_for(out_count), kThreads, 0, stream>>>(partial, out_count, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
