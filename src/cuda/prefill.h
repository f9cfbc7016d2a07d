// The CUDA model's prefill: T consecutive tokens of one sequence through all layers at once, mirroring
// cpu/forward.cpp step by step like the decode step, with the many-row kernels: tensor-core GEMMs for the
// projections, the grouped expert GEMM, chunked Gated DeltaNet, flash attention (for rows beyond the QSA
// budget block-masked by the batched QSA selection), the PLE conv over the chunk. The per-sequence
// state comes out exactly where token-by-token decoding would leave it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_model.h"
#include "cuda/memory/kv_cache.h"
#include "cuda/sequence_state.h"

namespace imp::cuda {

// Rows per LM-head GEMM when every prompt row's logits are asked for.
constexpr int32_t kPrefillLogitRows = 64;

// Scratch for prefill chunks of up to max_tokens tokens of sequences of up to max_context tokens.
struct PrefillWorkspace {
  PrefillWorkspace(const DeviceModel& model, int32_t max_tokens, int64_t max_context);
  // Device bytes a workspace for `tokens` tokens takes (the memory plan sizes the chunk with it).
  static uint64_t bytes_for(const DeviceModel& model, int32_t tokens, int64_t max_context);

  int32_t max_tokens = 0;
  DeviceBuffer<int32_t> tokens, positions;             // [T]
  DeviceBuffer<float> stream, normed, mix;              // [T, S*d]
  DeviceBuffer<float> low, inject, x, y;                // [T, rank], [T, S], [T, d], [T, d]
  DeviceBuffer<float> x_terms;                          // x's two bf16 terms, [T, d] each (launch_hc_mix)
  DeviceBuffer<float> mixed, conv_out, z, b, a, core;   // GDN: [T, conv], [T, conv], [T, vd], [T, hv] x2, [T, max(vd, heads*hd)]
  DeviceBuffer<float> qg, k, v, index_q, index_k;       // attention: [T, heads*2hd], [T, kvw] x2, [T, ih*id], [T, id]
  DeviceBuffer<int32_t> selected, selected_count;       // [T, max_selected], [T]
  DeviceBuffer<float> attention_partials;               // the per-row attention kernel's split partials
  DeviceBuffer<float> qsa_scores;
  DeviceBuffer<uint32_t> block_mask;                    // QSA selection bitmaps [T, mask_words] (launch_qsa_select_rows)
  int32_t mask_words = 0;                               // words for max_context / ratio blocks and the tail's block
  DeviceBuffer<float> logits_router, shared;            // [T, E], [T, 2 I_s] then [T] gate logits
  DeviceBuffer<int32_t> top_experts;                    // [T, k]
  DeviceBuffer<float> top_weights;                      // [T, k]
  DeviceBuffer<float> shared_act;                       // [T, I_s]
  DeviceBuffer<int64_t> ple_ids;                        // [T, ngram heads]
  DeviceBuffer<float> ple_emb, ple_key, ple_value, ple_query, ple_gated, ple_normed;
  DeviceBuffer<uint16_t> expert_act;                    // BF16 slots: [T * k, padded I] for the row kernels
  DeviceBuffer<float> gemm_scratch;                     // the split GEMM's bf16 terms
  // With the model's FP8 low-term weights: the low term of the next GEMM input with FP8 weights as E4M3 rows
  // [T, k <= max GEMM input] and their scales [T] (with_low8 in prefill.cpp).
  DeviceBuffer<uint8_t> lo8;
  DeviceBuffer<float> lo8_scales;
  // x again as one fp16 term [T, k <= max GEMM input] (launch_f16_terms) and its scale, made by each
  // hyper-connection read whose x feeds rows with an fp16 copy (DeviceModel::build_low_term_weights), then by the
  // output projections' inputs; empty without those copies.
  DeviceBuffer<uint16_t> x16;
  float x16_scale = 0.0f;
  DeviceBuffer<uint8_t> scratch;                        // the expert GEMM's and chunked GDN's workspace (shared)
  int32_t max_selected = 1;
};

// Runs tokens [count <= ws.max_tokens] (already in ws.tokens, positions in ws.positions) at the sequence's
// current length; leaves the streams of the chunk's rows in ws.stream. Does not change sequence.length.
void enqueue_prefill(const DeviceModel& model, const KvCache& kv, SequenceStateDevice& sequence, PrefillWorkspace& ws,
                     int32_t count, cudaStream_t stream);

// The final mixer read and LM head for chunk rows [first, first + rows) of ws.stream: logits [rows, vocab].
// rows <= min(ws.max_tokens, kPrefillLogitRows).
void enqueue_prefill_logits(const DeviceModel& model, PrefillWorkspace& ws, int32_t first, int32_t rows, float* logits,
                            cudaStream_t stream);

}  // namespace imp::cuda
