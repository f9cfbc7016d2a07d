// Flash-style causal attention for prefill: many query rows of ONE sequence over its paged KV cache, on
// tensor cores (mma.m16n8k16, bf16 operands, fp32 accumulation and softmax).
//
// Contract (launch_attention_prefill), the math of launch_attention_decode for many rows:
//   out[row, h, :] = sigmoid(gate[row, h, :]) * sum_{n in N(row)} softmax_n(q[row, h] . K[n, kvh] / sqrt(D)) V[n, kvh]
//   with N(row) = {n <= positions[row]} (dense causal) or its subset the block mask allows (below),
//   and kvh = h / (heads / kv_heads). Query and gate head (row, h) start at q / gate + (row * heads + h) *
//   head_stride (fp32; head_stride % 4 == 0, q and gate 16-byte aligned, e.g. q_proj's [query | gate] heads);
//   out [rows, heads * D] fp32. positions[row] >= 0 (any order; normally p0 + row). The K/V of every token
//   n <= max(positions) must already be in the cache (launch_kv_append for the new rows first).
//   KV pages: all rows belong to one sequence, so only page_table row 0 is used (cache.max_pages is ignored
//   here; to append T rows with launch_kv_append, pass a KvPages copy with max_pages = 0 so every row reads
//   row 0 of the table). bf16 or fp32 pages (fp32 are rounded to bf16 as they are loaded).
//   q is rounded to bf16, and so are the probabilities before P.V (as flash kernels and HF eager do).
//   D (head_dim) in {32, 64, 128, 256}.
//   Block mask (QSA rows beyond the indexer budget; nullptr = dense causal): block_mask [rows, mask_words]
//   uint32 words, and row `row` attends key n iff n <= positions[row] and bit n / ratio (word (n / ratio) / 32,
//   bit (n / ratio) % 32) of its words is set: launch_qsa_select_rows's bitmap. Only the bits of blocks
//   <= positions[row] / ratio are read. The softmax runs over exactly the attended keys (the math of
//   launch_attention_decode over that token list); a row that attends nothing writes zeros. Key tiles that no
//   row of a 64-row query tile attends are skipped (neither loaded nor multiplied).
//   Blocks: 64 query rows x one head, 4 warps of 16 rows; K/V tiles of 64 tokens; ~100 KB shared memory at
//   D = 256 (two blocks per SM). D = 256 on bf16 pages of 8..64 tokens dividing 64 or multiples of 64, with
//   cache.pages set, instead: 128 query rows x one head, two consumer warpgroups on wgmma and a producer
//   warpgroup whose first thread copies K/V by tensor copies, 194 KB of shared memory (one block per SM); key
//   tiles no row of the 128 attends are skipped. Whole pages are copied: the cache must hold no NaN past a
//   sequence's end (KvCache zeroes its pool). Host: two tensor maps encoded per call. No allocation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/attention_decode.h"

namespace imp::cuda {

void launch_attention_prefill(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                              const int32_t* positions, int32_t rows, int32_t heads, int32_t kv_heads,
                              int32_t head_dim, float* out, cudaStream_t stream, const uint32_t* block_mask = nullptr,
                              int32_t mask_words = 0, int32_t ratio = 1);

}  // namespace imp::cuda
