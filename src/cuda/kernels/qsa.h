// QSA indexer selection (decode rows as token lists, prefill rows as block bitmaps), the math of cpu::qsa_select:
//   block key b = RoPE_{pos 4b}( k_layernorm( mean(raw keys of tokens [r*b, r*b + r)) ) ), computed once per
//   completed block into a block-key cache (launch_qsa_block_keys);
//   score_b = sum_h relu(q_h . key_b) / sqrt(dim); keep the top `block_topk` blocks (ties: lower block) plus the
//   incomplete tail, as a sorted token list (launch_qsa_select; in decode launch_qsa_decode_select, which also does
//   the token's index prep).
// While every block fits the budget the selection is all tokens: callers then use dense attention.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace imp::cuda {

// The index heads and dims the selection kernels hold in registers (the released model: 4 x 128); the engine
// refuses larger indexers at load.
constexpr int32_t kQsaMaxIndexHeads = 8, kQsaMaxIndexDim = 128;

// block_keys[b] for b in [first_block, last_block) of one sequence, from raw_keys [tokens, dim] (fp32,
// contiguous per sequence); k_norm bf16 [dim]; RoPE on [0, rotary_dim) with inv_freq.
void launch_qsa_block_keys(const float* raw_keys, int32_t first_block, int32_t last_block, int32_t ratio, int32_t dim,
                           const uint16_t* k_norm, float eps, int32_t rotary_dim, const float* inv_freq,
                           float* block_keys, cudaStream_t stream);

// One row at positions[0] (device memory, so a captured graph replays at any length): queries [heads, dim]
// (normed, rotated); blocks = complete blocks of the visible tokens (position + 1) / ratio <= max_blocks (the
// block-key cache's capacity); scores scratch [blocks]. Writes selected [block_topk * ratio + ratio - 1] and
// its count. A grid-wide kernel writes the scores, then the selection (a radix select on the score bits, parallel
// scans) runs on a cluster of blocks when max_blocks <= qsa_select_cluster_max_blocks(), else on one block that
// reads the scores from L2 in every pass.
int32_t qsa_select_cluster_max_blocks();
void launch_qsa_select(const float* queries, int32_t heads, int32_t dim, const float* block_keys,
                       const int32_t* positions, int32_t ratio, int32_t block_topk, int32_t max_blocks, float* scores,
                       int32_t* selected, int32_t* selected_count, cudaStream_t stream);

// Decode: the token's index prep and launch_qsa_select's scores and selection in two kernels. index: the index
// GEMV's raw output [heads query heads | raw key] (each dim wide); the query heads are (1 + w) normed
// (q_norm) and rotated at positions[0] as launch_head_norm_rope does (the same bits), the raw key is appended to
// raw_keys [tokens, dim] and, when the token completes a block, that block's key written to block_keys (as
// launch_qsa_block_keys: the same bits); then the scores and the selection as launch_qsa_select. One boundary less
// than a separate prep kernel on the decode step's QSA branch (session 36: decode at 32K +0.4%).
struct QsaDecodeIndex {
  const float* index = nullptr;
  const uint16_t* q_norm = nullptr;
  const uint16_t* k_norm = nullptr;
  int32_t heads = 0, dim = 0, rotary_dim = 0, ratio = 1;
  const float* inv_freq = nullptr;
  float eps = 0.0f;
  float* raw_keys = nullptr;
  float* block_keys = nullptr;
  const int32_t* positions = nullptr;
};
// whole_sms: the cluster selection's blocks ask for all the shared memory a block may have, so no other kernel's
// blocks share their SMs (the decode graph beyond the budget, where the selection runs beside the attention
// in-projection GEMVs: its radix passes took ~1.8 us each there, ~1.1 alone; decode at 32K +0.35%, at 1K -0.8%,
// where it waits for whole SMs to do nothing; session 37). The same result either way.
void launch_qsa_decode_select(const QsaDecodeIndex& index, int32_t block_topk, int32_t max_blocks, float* scores,
                              int32_t* selected, int32_t* selected_count, bool whole_sms, cudaStream_t stream);

// Prefill: many rows in one launch, rows at positions[0 .. rows) (device, any order), queries [rows, heads,
// dim] (normed, rotated). The same scores and top-k as launch_qsa_select (bit-identical scores, ties: lower
// block), written as a selection bitmap per row: mask [rows, mask_words] (uint32 words, block j in word
// j / 32, bit j % 32), with for a row at position p (visible = p + 1, blocks = visible / ratio):
//   bit j, j < blocks:  block j (tokens [j*ratio, j*ratio + ratio)) is among the top min(block_topk, blocks);
//   bit blocks:         set iff visible % ratio != 0 (the incomplete tail block, tokens [blocks*ratio, visible));
//   bits > blocks:      zero within the word of bit `blocks`; later words are not written.
// So the row's token set is exactly {s <= p : bit s / ratio set}, the list launch_qsa_select writes.
// max_blocks >= every row's blocks (sizes the shared memory), at most qsa_select_rows_max_blocks(heads, dim);
// mask_words >= max_blocks / 32 + 1. Callers with longer contexts keep the per-row launch_qsa_select.
int32_t qsa_select_rows_max_blocks(int32_t heads, int32_t dim);
void launch_qsa_select_rows(const float* queries, int32_t rows, int32_t heads, int32_t dim, const float* block_keys,
                            const int32_t* positions, int32_t max_blocks, int32_t ratio, int32_t block_topk,
                            uint32_t* mask, int32_t mask_words, cudaStream_t stream);

}  // namespace imp::cuda
