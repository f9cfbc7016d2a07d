#include "cuda/kernels/embedding.h"

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/kernels/device_math.cuh"
#include "cuda/kernels/fp_codes.cuh"

namespace imp::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void embed_streams_kernel(const uint16_t* table, const int32_t* tokens, int d, int streams, float* out) {
  pdl_begin();
  const int row = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const float value = bf16_bits_to_float(table[static_cast<size_t>(tokens[row]) * d + j]);
  for (int s = 0; s < streams; ++s) out[(static_cast<size_t>(row) * streams + s) * d + j] = value;
}

}  // namespace

void launch_embed_streams(const uint16_t* table, const int32_t* tokens, int32_t rows, int32_t d, int32_t streams,
                          float* stream_rows, cudaStream_t stream) {
  launch_kernel(embed_streams_kernel, dim3((d + kThreads - 1) / kThreads, rows), kThreads, 0, stream, 1,
                table, tokens, d, streams,
                                                                                          stream_rows);
}

}  // namespace imp::cuda
