// Device pieces shared by the decode-attention kernels (attention_decode.cu) and their prep kernels
// (attention_decode_prep.cu): the head-size bound and the paged KV cache's addressing.
#pragma once

#include <cstddef>

#include "cuda/kernels/attention_decode.h"

namespace imp::cuda::attention {

// Internal linkage, as when these lived in one .cu file: each kernel file compiles its own copy.
namespace {

constexpr int kMaxHeadDim = 512;

__device__ __forceinline__ size_t cache_index(const KvPages& c, int row, int token, int offset, int width) {
  const int page = c.page_table[row * c.max_pages + token / c.page_size];
  return (static_cast<size_t>(page) * c.page_size + token % c.page_size) * width + offset;
}

}  // namespace
}  // namespace imp::cuda::attention
