#include "cuda/kernels/shared_expert.h"

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/gemv_row.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void swiglu_gated_kernel(const float* gate, const float* up, int in_stride, int inter, const float* gate_logit,
                                    float* act) {
  pdl_begin();
  const int row = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  const float g = gate[static_cast<size_t>(row) * in_stride + i];
  act[static_cast<size_t>(row) * inter + i] =
      sigmoidf(gate_logit[row]) * (g * sigmoidf(g) * up[static_cast<size_t>(row) * in_stride + i]);
}

// One warp per output n: v = y_experts[n] + sigmoid(gate_logit) * (W_down . swiglu)[n], then the
// hyper-connection write stream[s * d + n] += inject[s] * v.
__global__ void shared_expert_hc_write_kernel(const uint16_t* down, const float* proj, int inter, int d,
                                              const float* y_experts, const float* inject, int streams, float* stream_row) {
  pdl_trigger();  // weights first: bf16_row_dots waits before it reads x
  const int n = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (n >= d) return;
  float acc[1];
  bf16_row_dots<1>(down + static_cast<size_t>(n) * inter, inter, SwigluX{proj, proj + inter}, acc);
  if (threadIdx.x % kWarp != 0) return;
  const float v = y_experts[n] + sigmoidf(proj[2 * inter]) * acc[0];
  hc_write_value(stream_row, static_cast<size_t>(d), static_cast<size_t>(n), inject, streams, v);
}

}  // namespace

void launch_shared_expert_hc_write(const uint16_t* down, const float* proj, int32_t inter, int32_t d,
                                   const float* y_experts, const float* inject, int32_t streams, float* stream_row,
                                   cudaStream_t stream) {
  if (inter % 8 != 0 || streams < 1 || streams > kMaxHcStreams) {
    throw_invalid_launch("shared_expert_hc_write: intermediate size % 8 != 0 or streams outside [1, 8]");
  }
  launch_kernel(shared_expert_hc_write_kernel, gemv_split_blocks(d, 1), kGemvThreads, 0, stream, 1, down, proj, inter, d, y_experts,
                inject, streams, stream_row);
}

void launch_swiglu_gated(const float* gate, const float* up, int32_t in_stride, const float* gate_logit, int32_t rows,
                         int32_t inter, float* act, cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel(swiglu_gated_kernel, dim3((inter + kThreads - 1) / kThreads, rows), kThreads, 0, stream, 1,
                gate, up, in_stride, inter, gate_logit, act);
}

}  // namespace imp::cuda
