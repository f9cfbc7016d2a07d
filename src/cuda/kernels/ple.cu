#include "cuda/kernels/ple.h"

#include <cuda_bf16.h>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {


__global__ void ple_gather_kernel(PleTableDevice table, const int64_t* ids, int heads, float* emb) {
  pdl_begin();
  const int row = blockIdx.y, head = blockIdx.x;
  const int64_t id = ids[row * heads + head] % table.row_count;  // a no-op except on smaller dummy tables
  float* out = emb + (static_cast<size_t>(row) * heads + head) * table.head_dim;
  for (int i = threadIdx.x; i < table.head_dim; i += blockDim.x) {
    const size_t at = static_cast<size_t>(id) * table.head_dim + i;
    if (table.fp8) {
      out[i] = __bfloat162float(__float2bfloat16_rn(e4m3_to_float(table.rows[at]) * table.scale));
    } else {
      out[i] = bf16_bits_to_float(reinterpret_cast<const uint16_t*>(table.rows)[at]);
    }
  }
}

// One block per (row, stream): a block-wide dot, then every thread scales its share of the value.
constexpr int kGateThreads = 256;

__global__ void __launch_bounds__(kGateThreads) ple_gate_kernel(const float* key, const float* query, const float* value,
                                                               int streams, int d, float* gated) {
  pdl_begin();
  __shared__ float partial[kGateThreads / kWarp];
  __shared__ float gate_s;
  const int row = blockIdx.y, s = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const size_t base = (static_cast<size_t>(row) * streams + s) * d;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < d; j += kGateThreads) dot += key[base + j] * query[base + j];
  dot = warp_sum(dot);
  if (lane == 0) partial[warp] = dot;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kGateThreads / kWarp; ++w) total += partial[w];
    float gate = total * rsqrtf(static_cast<float>(d));
    const float magnitude = sqrtf(fmaxf(fabsf(gate), 1e-6f));
    gate = gate > 0.0f ? magnitude : (gate < 0.0f ? -magnitude : 0.0f);
    gate_s = 1.0f / (1.0f + expf(-gate));
  }
  __syncthreads();
  const float g = gate_s;
  for (int j = threadIdx.x; j < d; j += kGateThreads) gated[base + j] = g * value[static_cast<size_t>(row) * d + j];
}

__global__ void ple_conv_step_kernel(const float* gated, const float* normed, const uint16_t* conv_weight, int kernel,
                                     int dilation, float* state, int width, float* stream_rows) {
  pdl_begin();
  const int row = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= width) return;
  const int history = (kernel - 1) * dilation;
  float* st = state + static_cast<size_t>(row) * history * width;
  const size_t at = static_cast<size_t>(row) * width + c;
  const float current = normed[at];
  // Taps at t - (kernel-1-j)*dilation: state row j*dilation for j < kernel-1, then the current row.
  float sum = bf16_bits_to_float(conv_weight[c * kernel + kernel - 1]) * current;
  for (int j = 0; j < kernel - 1; ++j) sum += bf16_bits_to_float(conv_weight[c * kernel + j]) * st[j * dilation * width + c];
  for (int r = 0; r + 1 < history; ++r) st[r * width + c] = st[(r + 1) * width + c];
  st[(history - 1) * width + c] = current;
  stream_rows[at] += gated[at] + sum / (1.0f + expf(-sum));
}

}  // namespace

void launch_ple_gather(const PleTableDevice& table, const int64_t* ids, int32_t rows, int32_t heads, float* emb,
                       cudaStream_t stream) {
  launch_kernel(ple_gather_kernel, dim3(heads, rows), 128, 0, stream, 1, table, ids, heads, emb);
}

void launch_ple_gate(const float* key, const float* query, const float* value, int32_t rows, int32_t streams,
                     int32_t d, float* gated, cudaStream_t stream) {
  launch_kernel(ple_gate_kernel, dim3(streams, rows), kGateThreads, 0, stream, 1, key, query, value, streams, d, gated);
}

void launch_ple_conv_step(const float* gated, const float* normed, const uint16_t* conv_weight, int32_t kernel,
                          int32_t dilation, float* state, int32_t rows, int32_t width, float* stream_rows,
                          cudaStream_t stream) {
  if (kernel < 2 || dilation < 1) throw_invalid_launch("ple conv: kernel must be >= 2 and dilation >= 1");
  launch_kernel(ple_conv_step_kernel, dim3((width + 255) / 256, rows), 256, 0, stream, 1,
                gated, normed, conv_weight, kernel, dilation,
                                                                             state, width, stream_rows);
}

}  // namespace imp::cuda
