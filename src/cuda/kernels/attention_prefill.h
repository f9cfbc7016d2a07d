// Flash-style causal attention for prefill: many query rows of ONE sequence over its paged KV cache, on
// tensor cores (mma.m16n8k16, bf16 operands, fp32 accumulation and softmax).
//
// Contract (launch_attention_prefill), the math of launch_attention_decode for many rows (dense causal only):
//   out[row, h, :] = sigmoid(gate[row, h, :]) * sum_{n <= positions[row]} softmax_n(q[row, h] . K[n, kvh] / sqrt(D)) V[n, kvh]
//   with kvh = h / (heads / kv_heads). Query and gate head (row, h) start at q / gate + (row * heads + h) *
//   head_stride (fp32; head_stride % 4 == 0, q and gate 16-byte aligned, e.g. q_proj's [query | gate] heads);
//   out [rows, heads * D] fp32. positions[row] >= 0 (any order; normally p0 + row). The K/V of every token
//   n <= max(positions) must already be in the cache (launch_kv_append for the new rows first).
//   KV pages: all rows belong to one sequence, so only page_table row 0 is used (cache.max_pages is ignored
//   here; to append T rows with launch_kv_append, pass a KvPages copy with max_pages = 0 so every row reads
//   row 0 of the table). bf16 or fp32 pages (fp32 are rounded to bf16 as they are loaded).
//   q is rounded to bf16, and so are the probabilities before P.V (as flash kernels and HF eager do).
//   D (head_dim) in {32, 64, 128, 256}. QSA-selected rows (beyond the indexer budget) are not supported here:
//   run those rows through launch_attention_decode with their token lists.
//   Blocks: 64 query rows x one head, 4 warps of 16 rows; K/V tiles of 64 tokens; ~100 KB shared memory at
//   D = 256 (two blocks per SM). No allocation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/attention_decode.h"

namespace imp::cuda {

void launch_attention_prefill(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                              const int32_t* positions, int32_t rows, int32_t heads, int32_t kv_heads,
                              int32_t head_dim, float* out, cudaStream_t stream);

}  // namespace imp::cuda
