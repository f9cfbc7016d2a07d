// Gated attention for decode rows over a paged KV cache, the math of cpu::attention for one token:
// per-head (1+w) RMSNorm and partial NeoX RoPE of q and k, K/V appended to the sequence's pages, softmax
// attention of each query head over its KV head's cached tokens (all of them, or the QSA selection),
// and the sigmoid output gate. The projections run on the dense kernels.
//
// KV pages: a pool [pages, page_size, kv_heads * head_dim] for K and one for V (Cache = float or bf16
// bits); page_table [rows, max_pages] maps a row's token t to page page_table[t / page_size].
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace imp::cuda {

// x in place, head (row, h) at x + (row * heads + h) * head_stride: (1 + w) RMSNorm per head (w bf16
// [head_dim]), then RoPE on dims [0, rotary_dim) in pairs (i, i + rotary_dim/2) at positions[row];
// inv_freq [rotary_dim / 2] fp32. head_stride is 2 * head_dim for q_proj's [query | gate] heads.
void launch_head_norm_rope(float* x, int32_t head_stride, const uint16_t* weight, int32_t rows, int32_t heads, int32_t head_dim,
                           int32_t rotary_dim, const int32_t* positions, const float* inv_freq, float eps,
                           cudaStream_t stream);

struct KvPages {
  void* keys = nullptr;    // [pages, page_size, kv_heads * head_dim]
  void* values = nullptr;  // same
  const int32_t* page_table = nullptr;  // [rows, max_pages]
  int32_t max_pages = 0;
  int32_t page_size = 0;
  int32_t pages = 0;  // pages in the pool (the extent of the prefill attention's tensor maps)
  bool bf16 = true;   // storage: bf16 bits, or fp32
};

// Writes k and v [rows, kv_heads * head_dim] at token positions[row].
void launch_kv_append(const KvPages& cache, const float* k, const float* v, const int32_t* positions, int32_t rows,
                      int32_t kv_width, cudaStream_t stream);

// Decode of one row (the token at positions[0]): every per-head step between the attention in-projection and
// the attention itself, in one launch. (1 + w) RMSNorm + RoPE on the first rotary_dim dims (as
// launch_head_norm_rope) of the query heads, in place in q_gate (head h at h * 2 * head_dim), and of the key
// heads, whose keys go with their values into the KV pages (as launch_kv_append; k itself is left as it
// is). The QSA indexer's prep is launch_qsa_decode_select's (qsa.h). Graph-safe: the position is read on the
// device. head_dim <= 512.
struct DecodePrep {
  float* q_gate = nullptr;
  const uint16_t* q_norm = nullptr;
  int32_t heads = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  const uint16_t* k_norm = nullptr;
  int32_t kv_heads = 0, head_dim = 0, rotary_dim = 0;
  KvPages cache;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  float eps = 0.0f;
};
void launch_attention_decode_prep(const DecodePrep& prep, cudaStream_t stream);

// out [rows, heads * head_dim] = sigmoid(gate) * softmax(q k^T / sqrt(head_dim)) v over tokens
// 0..positions[row] (selected == nullptr) or over selected[row, 0..selected_count[row]), a sorted list of
// distinct tokens <= positions[row] (as launch_qsa_select writes it; a list of all of them is not read). Query
// and gate head (row, h) start at q / gate + (row * heads + h) * head_stride. gate may be null: then out is the
// attention output before its gate (the decode graph multiplies sigmoid(gate) in at the output projection).
// Flash-decoding: each (row, KV head) splits its token list over a fixed number of blocks chosen here from
// rows * heads (the count is read on the device, so a captured graph replays at any length); each block
// serves all query heads of its GQA group from one K/V load (16-byte loads when head_dim is a multiple of 8
// for bf16 pages, 4 for fp32, and the pools are 16-byte aligned; with bf16 pages, head_dim a multiple of 16 up
// to 256 and 16-byte aligned queries, on tensor cores), then a second kernel merges the splits.
// workspace: fp32 scratch of attention_decode_workspace_floats(rows, heads, head_dim) elements (any
// contents; only read after this call's own writes).
void launch_attention_decode(const KvPages& cache, const float* q, const float* gate, int32_t head_stride,
                             const int32_t* positions,
                             const int32_t* selected, const int32_t* selected_count, int32_t max_selected,
                             int32_t rows, int32_t heads, int32_t kv_heads, int32_t head_dim, float* workspace,
                             float* out, cudaStream_t stream);

// Floats of scratch launch_attention_decode needs for `rows` rows of `heads` query heads.
size_t attention_decode_workspace_floats(int32_t rows, int32_t heads, int32_t head_dim);

}  // namespace imp::cuda
