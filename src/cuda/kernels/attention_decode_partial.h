// The contract between launch_attention_decode (attention_decode.cu) and the tensor-core partial kernel
// (attention_decode_mma.cu): one block per (split, KV head x head chunk, row), partials in the layout the
// combine kernel reads.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/attention_decode.h"

namespace imp::cuda::attention {

struct PartialArgs {
  KvPages cache;
  const float* q;
  int head_stride;
  const int32_t* positions;
  const int32_t* selected;
  const int32_t* selected_count;
  int max_selected, heads, kv_heads, hd, group_chunk, lanes, tile, splits;
  float* partial_acc;
  float* partial_stats;
};

// Split `split` of `splits` takes tokens [begin, end) of a row's `count`: whole tiles of `tile` tokens but the
// last; a split past the end gets an empty range.
__host__ __device__ inline void split_range(int count, int splits, int split, int tile, int& begin, int& end) {
  const int per_split = ((count + splits - 1) / splits + tile - 1) / tile * tile;
  begin = split * per_split;
  end = count < begin + per_split ? count : begin + per_split;
}

// The tensor-core partial kernel takes bf16 pages (16-byte aligned: `vector`), head_dim a multiple of 16 up to
// 256, up to 16 query heads per block and 16-byte aligned queries (head_stride a multiple of 4 floats); it works
// through tiles of 16 tokens (a.tile and a.lanes are the CUDA-core kernel's and unused).
bool partial_mma_supported(const KvPages& cache, const float* q, int head_stride, int head_dim, bool vector);
void launch_partial_mma(const PartialArgs& a, dim3 grid, cudaStream_t stream);

}  // namespace imp::cuda::attention
