#include "cuda/kernels/ple_prefill.h"

#include "cuda/check.h"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

__device__ __forceinline__ float padded_row(const float* state, const float* normed, int history, int width, int r, int c) {
  return r < history ? state[static_cast<size_t>(r) * width + c] : normed[static_cast<size_t>(r - history) * width + c];
}

__global__ void ple_conv_prefill_kernel(const float* gated, const float* normed, const uint16_t* conv_weight, int kernel,
                                        int dilation, const float* state, int width, float* stream_rows) {
  const int t = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= width) return;
  const int history = (kernel - 1) * dilation;
  float sum = 0.0f;
  for (int j = 0; j < kernel; ++j) {
    sum += bf16_bits_to_float(conv_weight[c * kernel + j]) * padded_row(state, normed, history, width, t + j * dilation, c);
  }
  const size_t at = static_cast<size_t>(t) * width + c;
  stream_rows[at] += gated[at] + sum / (1.0f + expf(-sum));
}

// After the conv has read it: state row r becomes P[tokens + r]. One thread per column walks r upwards, so an
// in-place shift only reads rows not yet overwritten.
__global__ void ple_state_advance_kernel(const float* normed, int history, int tokens, int width, float* state) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= width) return;
  for (int r = 0; r < history; ++r) state[static_cast<size_t>(r) * width + c] = padded_row(state, normed, history, width, tokens + r, c);
}

}  // namespace

void launch_ple_conv_prefill(const float* gated, const float* normed, const uint16_t* conv_weight, int32_t kernel,
                             int32_t dilation, float* state, int32_t tokens, int32_t width, float* stream_rows,
                             cudaStream_t stream) {
  if (kernel < 2 || dilation < 1) throw_invalid_launch("ple conv prefill: kernel must be >= 2 and dilation >= 1");
  if (tokens < 1) return;
  const int blocks = (width + 255) / 256;
  ple_conv_prefill_kernel<<<dim3(blocks, tokens), 256, 0, stream>>>(gated, normed, conv_weight, kernel, dilation, state,
                                                                   width, stream_rows);
  IMP_CUDA_CHECK_LAUNCH();
  ple_state_advance_kernel<<<blocks, 256, 0, stream>>>(normed, (kernel - 1) * dilation, tokens, width, state);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
