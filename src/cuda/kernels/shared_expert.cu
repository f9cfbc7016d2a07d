#include "cuda/kernels/shared_expert.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void swiglu_kernel(const float* gate, const float* up, int in_stride, int inter, float* act) {
  const int row = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  const float g = gate[static_cast<size_t>(row) * in_stride + i];
  act[static_cast<size_t>(row) * inter + i] = g * sigmoidf(g) * up[static_cast<size_t>(row) * in_stride + i];
}

__global__ void add_sigmoid_gated_kernel(const float* shared, const float* gate_logit, int logit_stride, int d,
                                         float* y) {
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const float gate = sigmoidf(gate_logit[static_cast<size_t>(row) * logit_stride]);
  y[static_cast<size_t>(row) * d + j] += gate * shared[static_cast<size_t>(row) * d + j];
}

}  // namespace

void launch_swiglu(const float* gate, const float* up, int32_t in_stride, int32_t rows, int32_t inter, float* act,
                   cudaStream_t stream) {
  swiglu_kernel<<<dim3((inter + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(gate, up, in_stride, inter, act);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_add_sigmoid_gated(const float* shared, const float* gate_logit, int32_t logit_stride, int32_t rows,
                              int32_t d, float* y, cudaStream_t stream) {
  add_sigmoid_gated_kernel<<<dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(shared, gate_logit,
                                                                                              logit_stride, d, y);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
