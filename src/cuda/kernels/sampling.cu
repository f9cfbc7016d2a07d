#include "cuda/kernels/sampling.h"

#include <cfloat>
#include <climits>

#include "cuda/check.h"
#include "cuda/kernels/device_math.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void keep_better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void argmax_kernel(const float* logits, int vocab, int32_t* tokens) {
  __shared__ float best_v[kThreads / kWarp];
  __shared__ int best_i[kThreads / kWarp];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  float v = -FLT_MAX;
  int idx = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) keep_better(v, idx, row[i], i);
  for (int o = kWarp / 2; o > 0; o /= 2) {
    keep_better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  }
  if (threadIdx.x % kWarp == 0) {
    best_v[threadIdx.x / kWarp] = v;
    best_i[threadIdx.x / kWarp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / kWarp; ++w) keep_better(v, idx, best_v[w], best_i[w]);
    tokens[blockIdx.x] = idx;
  }
}

__global__ void advance_positions_kernel(int32_t* positions, int rows) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) positions[row] += 1;
}

}  // namespace

void launch_advance_positions(int32_t* positions, int32_t rows, cudaStream_t stream) {
  advance_positions_kernel<<<(rows + 127) / 128, 128, 0, stream>>>(positions, rows);
  IMP_CUDA_CHECK_LAUNCH();
}

void launch_argmax(const float* logits, int32_t rows, int32_t vocab, int32_t* tokens, cudaStream_t stream) {
  argmax_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, tokens);
  IMP_CUDA_CHECK_LAUNCH();
}

}  // namespace imp::cuda
