#include "cuda/kernels/hyper_connection.h"

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void silu_div_kernel(float* v, int64_t count, float inv_streams) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float x = v[i] * inv_streams;
  v[i] = x * sigmoidf(x);
}

__global__ void hc_mix_kernel(const float* mix, const float* normed, int streams, int d, float* x) {
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const size_t base = static_cast<size_t>(row) * streams * d + j;
  float sum = 0.0f;
  for (int s = 0; s < streams; ++s) sum += sigmoidf(mix[base + static_cast<size_t>(s) * d]) * normed[base + static_cast<size_t>(s) * d];
  x[static_cast<size_t>(row) * d + j] = sum * (1.0f / static_cast<float>(streams));
}

__global__ void hc_inject_kernel(float* inject, int count, float inv_streams) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) inject[i] = 2.0f * sigmoidf(inject[i] * inv_streams);
}

__global__ void hc_write_kernel(const float* y, const float* inject, int streams, int d, float* rows) {
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const float value = y[static_cast<size_t>(row) * d + j];
  for (int s = 0; s < streams; ++s) {
    rows[(static_cast<size_t>(row) * streams + s) * d + j] += inject[row * streams + s] * value;
  }
}

}  // namespace

void launch_silu_div(float* v, int64_t count, float streams, cudaStream_t stream) {
  silu_div_kernel<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(v, count, 1.0f / streams);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_mix(const float* mix, const float* normed, int32_t rows, int32_t streams, int32_t d, float* x,
                   cudaStream_t stream) {
  hc_mix_kernel<<<dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(mix, normed, streams, d, x);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_inject(float* inject, int32_t rows, int32_t streams, cudaStream_t stream) {
  const int count = rows * streams;
  hc_inject_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(inject, count, 1.0f / static_cast<float>(streams));
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_hc_write(const float* y, const float* inject, int32_t rows, int32_t streams, int32_t d, float* stream_rows,
                     cudaStream_t stream) {
  hc_write_kernel<<<dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream>>>(y, inject, streams, d, stream_rows);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
