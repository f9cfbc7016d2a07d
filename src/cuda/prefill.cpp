#include "cuda/prefill.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/blas.h"
#include "cuda/kernels/attention_decode.h"
#include "cuda/kernels/attention_prefill.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/embedding.h"
#include "cuda/kernels/gated_delta_net.h"
#include "cuda/kernels/gated_delta_net_prefill.h"
#include "cuda/kernels/gemm_bf16_split.h"
#include "cuda/kernels/hyper_connection.h"
#include "cuda/kernels/moe_expert.h"
#include "cuda/kernels/moe_prefill.h"
#include "cuda/kernels/moe_router.h"
#include "cuda/kernels/ngram_hash.h"
#include "cuda/kernels/ple.h"
#include "cuda/kernels/ple_prefill.h"
#include "cuda/kernels/qsa.h"
#include "cuda/kernels/shared_expert.h"
#include "cuda/launch.h"

namespace imp::cuda {
namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// The chunked GDN kernels take head dims that are multiples of 16 up to 128; smaller test shapes step token
// by token with the decode kernels instead (same math).
bool chunked_gdn_fits(const GatedDeltaNetShape& s) {
  return s.key_dim % 16 == 0 && s.value_dim % 16 == 0 && s.key_dim <= 128 && s.value_dim <= 128;
}

// The flash prefill kernel takes these head dims; others use the per-row attention kernel.
bool flash_attention_fits(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// fp32-grade activations for the GEMMs: x [tokens, k] as two bf16 terms, made once per input (valid until the
// next split: they share the workspace's scratch).
SplitActivations split(const float* x, int32_t tokens, int64_t k, PrefillWorkspace& ws, cudaStream_t stream) {
  return launch_split_bf16(x, tokens, static_cast<int32_t>(k), ws.gemm_scratch.data(), stream);
}
// y = x . W^T for rows [first_row, first_row + rows) of a stacked weight; y's rows are ldy apart (0: `rows`).
void gemm_rows(const DenseWeight& w, int64_t first_row, int64_t rows, const SplitActivations& x, float* y,
               cudaStream_t stream, bool accumulate = false, int64_t ldy = 0) {
  // One fp16 term where the rows have an fp16 copy, else the FP8 low term where they have an E4M3 copy
  // (DeviceModel::build_low_term_weights).
  auto covers = [&](int32_t first, int32_t end) { return first_row >= first && first_row + rows <= end; };
  const Fp8Copy& copy = w.low8;
  const Fp8Rows low8 = copy.codes.data != nullptr && covers(copy.first, copy.end)
                           ? Fp8Rows{copy.codes.data + (first_row - copy.first) * w.cols, copy.codes.scales + (first_row - copy.first)}
                           : Fp8Rows{};
  const F16Copy& half = w.half;
  const F16Rows rows16 = half.rows.data != nullptr && covers(half.first, half.end)
                             ? F16Rows{half.rows.data + (first_row - half.first) * w.cols, half.rows.scale}
                             : F16Rows{};
  launch_gemm_bf16_split(x, w.data + first_row * w.cols, static_cast<int32_t>(rows), y, stream, accumulate, low8, rows16,
                         static_cast<int32_t>(ldy));
}

// x with its low term as E4M3 rows in ws.lo8 when the model has FP8 low-term weights (the next GEMMs over rows
// with an E4M3 copy run that term in FP8; the rows stay until the next with_low8). Only for such GEMMs: the
// quantization is a pass over x.
SplitActivations with_low8(const SplitActivations& x, PrefillWorkspace& ws, cudaStream_t stream) {
  return ws.lo8.size() == 0 ? x : launch_low_term_fp8(x, ws.lo8.data(), ws.lo8_scales.data(), stream);
}
void gemm(const DenseWeight& w, const SplitActivations& x, float* y, cudaStream_t stream) {
  gemm_rows(w, 0, w.rows, x, y, stream);
}
// ws.y = the output projection of an fp32 input [T, width]: from its fp16 term where the weight has an fp16 copy
// (scale != 0; in ws.x16, the read's fp16 term being spent by then), else from its split terms with the FP8 low term.
void out_projection(const DenseWeight& w, const float* in, int32_t T, int64_t width, float scale, PrefillWorkspace& ws,
                    cudaStream_t stream) {
  if (scale != 0.0f && ws.x16.size() != 0) {
    ws.x16_scale = 0.0f;  // x_terms no longer finds the read's fp16 term there
    gemm(w, launch_f16_values(in, T, static_cast<int32_t>(width), scale, ws.x16.data(), stream), ws.y.data(), stream);
    return;
  }
  gemm(w, with_low8(split(in, T, width, ws, stream), ws, stream), ws.y.data(), stream);
}

// The raw inject logits [T, S] of a read: in ws.mix after the down projection's [T, rank] (free until the up
// projection).
float* raw_inject_logits(const model::ModelConfig& c, int32_t T, PrefillWorkspace& ws) {
  return ws.mix.data() + sz(T) * sz(c.hc_lowrank);
}

// Hyper-connection read of T rows (cpu::hyper_connection_read) from the split terms of its grouped norm N (in
// ws.gemm_scratch): x's split terms (x_terms), inject [T, S] when present, and x [T, d] in fp32 only where
// `fp32_x` (the BF16-slot expert kernels and the one-row logits GEMV read it; every GEMM reads the terms).
// `injects_ready`: the raw inject logits are already in raw_inject_logits (launch_hc_write_norm_split sums them).
void hyper_connection_read_normed(const model::ModelConfig& c, const HyperConnectionDevice& hc,
                                  const SplitActivations& normed, bool injects_ready, bool fp32_x, int32_t T,
                                  PrefillWorkspace& ws, cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count);
  const int32_t rank = static_cast<int32_t>(c.hc_lowrank);
  // down [T, rank] into ws.mix and, unless ready, inject [T, S] after it, as two GEMMs (the stacked width rank + S
  // sent cuBLAS to a slow split-K kernel), then both activations.
  const int32_t injects = hc.has_inject ? S : 0;
  float* raw_inject = raw_inject_logits(c, T, ws);
  gemm_rows(hc.down_inject, 0, rank, normed, ws.mix.data(), stream);
  if (!injects_ready) gemm_rows(hc.down_inject, rank, injects, normed, raw_inject, stream);
  launch_hc_activations(ws.mix.data(), raw_inject, T, rank, injects, S, ws.low.data(), ws.inject.data(), stream);
  // The up projection over [hi | lo] rows (into ws.normed: free, N's split terms fill the GEMM scratch), with the
  // mix in one kernel where the shape allows; otherwise one GEMM against the repeated weight rows
  // (HyperConnectionDevice::up) and the mix.
  const uint16_t* low_terms = launch_split_bf16_rows(ws.low.data(), T, rank, ws.normed.data(), stream);
  float* x = fp32_x ? ws.x.data() : nullptr;
  // Also x's fp16 term where rows with an fp16 copy read this x (their reads have a scale).
  ws.x16_scale = ws.x16.size() != 0 ? hc.x16_scale : 0.0f;
  uint16_t* x16 = ws.x16_scale != 0.0f ? ws.x16.data() : nullptr;
  if (hc_up_mix_fits(S, d, rank)) {
    launch_hc_up_mix(low_terms, hc.up.data, static_cast<int32_t>(hc.up.cols), rank, normed, S, d, x, ws.x_terms.data(),
                     stream, x16, ws.x16_scale);
    return;
  }
  gemm_bf16_rows(low_terms, hc.up.data, T, hc.up.rows, hc.up.cols, ws.mix.data(), false, stream);
  const SplitActivations terms = launch_hc_mix(ws.mix.data(), normed, S, d, x, ws.x_terms.data(), stream);
  if (x16 != nullptr) launch_f16_terms(terms, ws.x16_scale, x16, stream);
}

// The split terms of ws.x [T, d], which every hyper-connection read writes next to x (launch_hc_mix), and its
// fp16 term where the read made one.
SplitActivations x_terms(const model::ModelConfig& c, int32_t T, const PrefillWorkspace& ws) {
  const auto* hi = reinterpret_cast<const uint16_t*>(ws.x_terms.data());
  SplitActivations x{hi, hi + sz(T) * sz(c.hidden_size), T, static_cast<int32_t>(c.hidden_size)};
  if (ws.x16_scale != 0.0f) {
    x.x16 = ws.x16.data();
    x.x16_scale = ws.x16_scale;
  }
  return x;
}

// The whole read of T stream rows: the grouped norm and its split terms, then the rest.
void hyper_connection_read(const model::ModelConfig& c, const HyperConnectionDevice& hc, const float* stream_rows,
                           bool fp32_x, int32_t T, PrefillWorkspace& ws, cudaStream_t stream) {
  const int32_t width = static_cast<int32_t>(c.stream_width()), d = static_cast<int32_t>(c.hidden_size);
  launch_rms_norm(stream_rows, hc.norm.data, T, width, d, static_cast<float>(c.rms_norm_eps), ws.normed.data(), stream);
  hyper_connection_read_normed(c, hc, split(ws.normed.data(), T, width, ws, stream), false, fp32_x, T, ws, stream);
}

// The write of a block's output ws.y into the streams followed by the next read (with `next`'s norm): fused into
// one pass over the streams for the norm, its split terms and the inject logits where the shape allows (d % 4 == 0).
void hyper_connection_write_read(const model::ModelConfig& c, const HyperConnectionDevice& next, bool fp32_x,
                                 int32_t T, PrefillWorkspace& ws, cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count);
  if (d % 4 != 0) {
    launch_hc_write(ws.y.data(), ws.inject.data(), T, S, d, ws.stream.data(), stream);
    hyper_connection_read(c, next, ws.stream.data(), fp32_x, T, ws, stream);
    return;
  }
  const uint16_t* inject_weight =
      next.has_inject ? next.down_inject.data + static_cast<size_t>(c.hc_lowrank) * next.down_inject.cols : nullptr;
  const SplitActivations normed = launch_hc_write_norm_split(
      ws.y.data(), ws.inject.data(), T, S, d, ws.stream.data(), next.norm.data, static_cast<float>(c.rms_norm_eps),
      inject_weight, raw_inject_logits(c, T, ws), ws.gemm_scratch.data(), stream);
  hyper_connection_read_normed(c, next, normed, true, fp32_x, T, ws, stream);
}

void ple_block(const model::ModelConfig& c, const PleDevice& p, LayerStateDevice& state, PrefillWorkspace& ws,
               int32_t T, cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count), width = S * d;
  const float eps = static_cast<float>(c.rms_norm_eps);
  launch_ngram_ids(p.hash, ws.tokens.data(), T, state.ple_context.data(), ws.ple_ids.data(), stream);
  launch_ple_gather(p.table, ws.ple_ids.data(), T, static_cast<int32_t>(c.ngram_heads()), ws.ple_emb.data(), stream);
  const SplitActivations emb = split(ws.ple_emb.data(), T, c.ple_embed_dim, ws, stream);
  gemm_rows(p.key_value, 0, width, emb, ws.ple_key.data(), stream);
  gemm_rows(p.key_value, width, d, emb, ws.ple_value.data(), stream);
  launch_rms_norm(ws.ple_key.data(), p.norm_key.data, T, width, d, eps, ws.ple_key.data(), stream);
  launch_rms_norm(ws.stream.data(), p.norm_query.data, T, width, d, eps, ws.ple_query.data(), stream);
  launch_ple_gate(ws.ple_key.data(), ws.ple_query.data(), ws.ple_value.data(), T, S, d, ws.ple_gated.data(), stream);
  launch_rms_norm(ws.ple_gated.data(), p.norm_conv.data, T, width, d, eps, ws.ple_normed.data(), stream);
  launch_ple_conv_prefill(ws.ple_gated.data(), ws.ple_normed.data(), p.conv1d.data,
                          static_cast<int32_t>(c.ple_conv_kernel_size), static_cast<int32_t>(c.ngram_size),
                          state.ple_conv.data(), T, width, ws.stream.data(), stream);
}

void gated_delta_net(const model::ModelConfig& c, const GatedDeltaNetDevice& g, LayerStateDevice& state,
                     PrefillWorkspace& ws, int32_t T, cudaStream_t stream) {
  const GatedDeltaNetShape shape = gdn_shape(c);
  const int64_t conv = c.gdn_conv_dim(), vd = c.gdn_value_dim(), hv = c.linear_num_value_heads;
  // q | k (E4M3 copy), v (fp16 copy) into the rows of ws.mixed, then z (fp16 copy), b, a (bf16 terms).
  const int64_t qk = 2 * c.gdn_key_dim();
  const SplitActivations x = with_low8(x_terms(c, T, ws), ws, stream);
  gemm_rows(g.in_proj, 0, qk, x, ws.mixed.data(), stream, false, conv);
  gemm_rows(g.in_proj, qk, conv - qk, x, ws.mixed.data() + qk, stream, false, conv);
  gemm_rows(g.in_proj, conv, vd, x, ws.z.data(), stream);
  gemm_rows(g.in_proj, conv + vd, hv, x, ws.b.data(), stream);
  gemm_rows(g.in_proj, conv + vd + hv, hv, x, ws.a.data(), stream);
  if (!chunked_gdn_fits(shape)) {
    for (int32_t t = 0; t < T; ++t) {
      float* mixed = ws.mixed.data() + sz(t) * sz(conv);
      launch_gdn_conv_step(shape, g.small, mixed, state.gdn_conv.data(), 1, stream);
      launch_gdn_recurrent_step(shape, g.small, mixed, ws.z.data() + sz(t) * sz(vd), ws.b.data() + sz(t) * sz(hv),
                                ws.a.data() + sz(t) * sz(hv), state.gdn_recurrent.data(),
                                ws.core.data() + sz(t) * sz(vd), 1, stream);
    }
    out_projection(g.out_proj, ws.core.data(), T, vd, g.core16_scale, ws, stream);
    return;
  }
  // The core straight from the output kernel: its fp16 term only (in ws.x16) for the out projection's fp16 copy,
  // else its two bf16 terms (in ws.core: [T, vd] floats hold both).
  const bool f16 = g.core16_scale != 0.0f && ws.x16.size() != 0;
  auto* hi = reinterpret_cast<uint16_t*>(ws.core.data());
  SplitActivations core{hi, hi + sz(T) * sz(vd), T, static_cast<int32_t>(vd)};
  if (f16) {
    core = {nullptr, nullptr, T, static_cast<int32_t>(vd), nullptr, nullptr, ws.x16.data(), g.core16_scale};
    ws.x16_scale = 0.0f;  // x_terms no longer finds the read's fp16 term there
  }
  launch_gdn_conv_prefill(shape, g.small, ws.mixed.data(), state.gdn_conv.data(), T, ws.conv_out.data(), stream);
  launch_gdn_chunked_prefill(shape, g.small, ws.conv_out.data(), ws.z.data(), ws.b.data(), ws.a.data(),
                             state.gdn_recurrent.data(), T, ws.scratch.data(), ws.scratch.size(), f16 ? nullptr : hi,
                             f16 ? nullptr : hi + sz(T) * sz(vd), stream, f16 ? ws.x16.data() : nullptr, g.core16_scale);
  gemm(g.out_proj, f16 ? core : with_low8(core, ws, stream), ws.y.data(), stream);
}

void attention(const model::ModelConfig& c, const DeviceModel& model, const AttentionDevice& a, const KvCache& kv,
               SequenceStateDevice& sequence, LayerStateDevice& state, PrefillWorkspace& ws, int32_t T,
               cudaStream_t stream) {
  const int32_t heads = static_cast<int32_t>(c.num_attention_heads), kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  const int32_t hd = static_cast<int32_t>(c.head_dim), kv_width = kv_heads * hd, rot = static_cast<int32_t>(c.rotary_dim());
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t q_rows = int64_t{heads} * 2 * hd;
  const SplitActivations x = x_terms(c, T, ws);  // q, k, v: fp16 copies; the indexer below: its split terms
  gemm_rows(a.in_proj, 0, q_rows, x, ws.qg.data(), stream);
  gemm_rows(a.in_proj, q_rows, kv_width, x, ws.k.data(), stream);
  gemm_rows(a.in_proj, q_rows + kv_width, kv_width, x, ws.v.data(), stream);
  const int32_t* positions = ws.positions.data();
  launch_head_norm_rope(ws.qg.data(), 2 * hd, a.q_norm.data, T, heads, hd, rot, positions, model.inv_freq(), eps, stream);
  launch_head_norm_rope(ws.k.data(), hd, a.k_norm.data, T, kv_heads, hd, rot, positions, model.inv_freq(), eps, stream);
  // All rows belong to one sequence: page table row 0 for every row.
  KvPages pages = kv.pages(state.attention_index, sequence.page_table.data(), sequence.max_pages);
  pages.max_pages = 0;
  launch_kv_append(pages, ws.k.data(), ws.v.data(), positions, T, kv_width, stream);

  // Rows whose QSA selection is every visible token attend densely; later rows over their selection.
  int32_t dense_rows = T;
  const int64_t first = sequence.length;
  if (c.has_qsa) {
    const int32_t ih = static_cast<int32_t>(c.indexer_n_heads), id = static_cast<int32_t>(c.indexer_head_dim);
    const int32_t ratio = static_cast<int32_t>(c.indexer_compress_ratio);
    const int64_t index_first = q_rows + 2 * kv_width;
    gemm_rows(a.in_proj, index_first, int64_t{ih} * id, x, ws.index_q.data(), stream);
    gemm_rows(a.in_proj, index_first + int64_t{ih} * id, id, x, ws.index_k.data(), stream);
    IMP_CUDA_CHECK(cudaMemcpyAsync(state.index_keys.data() + sz(first) * sz(id), ws.index_k.data(),
                                   sz(T) * sz(id) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    launch_qsa_block_keys(state.index_keys.data(), static_cast<int32_t>(first / ratio), static_cast<int32_t>((first + T) / ratio),
                          ratio, id, a.index_k_norm.data, eps, rot, model.inv_freq(), state.block_keys.data(), stream);
    launch_head_norm_rope(ws.index_q.data(), id, a.index_q_norm.data, T, ih, id, rot, positions, model.inv_freq(), eps, stream);
    // Selection is everything while (position + 1) / ratio <= block_topk.
    const int64_t first_sparse = (c.block_topk() + 1) * ratio - 1;
    dense_rows = static_cast<int32_t>(std::clamp<int64_t>(first_sparse - first, 0, T));
    const int32_t sparse_rows = T - dense_rows, block_topk = static_cast<int32_t>(c.block_topk());
    const int32_t max_blocks = static_cast<int32_t>((first + T) / ratio);  // complete blocks of the last row
    const size_t q_at = sz(dense_rows) * sz(q_rows), out_at = sz(dense_rows) * sz(heads) * sz(hd);
    if (sparse_rows > 0 && flash_attention_fits(hd) && max_blocks <= qsa_select_rows_max_blocks(ih, id) &&
        max_blocks / 32 + 1 <= ws.mask_words) {
      // Rows beyond the budget: one batched selection into per-row block bitmaps, one block-masked flash attention.
      launch_qsa_select_rows(ws.index_q.data() + sz(dense_rows) * sz(ih) * sz(id), sparse_rows, ih, id,
                             state.block_keys.data(), positions + dense_rows, max_blocks, ratio, block_topk,
                             ws.block_mask.data(), ws.mask_words, stream);
      launch_attention_prefill(pages, ws.qg.data() + q_at, ws.qg.data() + q_at + hd, 2 * hd, positions + dense_rows,
                               sparse_rows, heads, kv_heads, hd, ws.core.data() + out_at, stream, ws.block_mask.data(),
                               ws.mask_words, ratio);
    } else if (sparse_rows > 0) {
      // Fallback for shapes the kernels above cannot take (head dims the flash kernel lacks, e.g. the 16-dim
      // fixtures; contexts beyond the batched selection's shared memory or the workspace's bitmaps): a
      // selection per row and the selected-token attention kernel (same math).
      for (int32_t t = dense_rows; t < T; ++t) {
        launch_qsa_select(ws.index_q.data() + sz(t) * sz(ih) * sz(id), ih, id, state.block_keys.data(), positions + t,
                          ratio, block_topk, static_cast<int32_t>(state.block_keys.size() / sz(id)),
                          ws.qsa_scores.data(), ws.selected.data() + sz(t) * sz(ws.max_selected),
                          ws.selected_count.data() + t, stream);
      }
      launch_attention_decode(pages, ws.qg.data() + q_at, ws.qg.data() + q_at + hd, 2 * hd, positions + dense_rows,
                              ws.selected.data() + sz(dense_rows) * sz(ws.max_selected), ws.selected_count.data() + dense_rows,
                              ws.max_selected, sparse_rows, heads, kv_heads, hd, ws.attention_partials.data(),
                              ws.core.data() + out_at, stream);
    }
  }
  if (dense_rows > 0) {
    if (flash_attention_fits(hd)) {
      launch_attention_prefill(pages, ws.qg.data(), ws.qg.data() + hd, 2 * hd, positions, dense_rows, heads, kv_heads, hd,
                               ws.core.data(), stream);
    } else {
      launch_attention_decode(pages, ws.qg.data(), ws.qg.data() + hd, 2 * hd, positions, nullptr, nullptr, 1, dense_rows,
                              heads, kv_heads, hd, ws.attention_partials.data(), ws.core.data(), stream);
    }
  }
  out_projection(a.o_proj, ws.core.data(), T, int64_t{heads} * hd, a.core16_scale, ws, stream);
}

// Bitmap words per row for sequences of up to max_context tokens: blocks 0 .. max_context / ratio.
int32_t qsa_mask_words(const model::ModelConfig& c, int64_t max_context) {
  return c.has_qsa ? static_cast<int32_t>(max_context / c.indexer_compress_ratio / 32 + 1) : 0;
}

void moe_block(const model::ModelConfig& c, const DeviceModel& model, const MoeDevice& m, PrefillWorkspace& ws,
               int32_t T, cudaStream_t stream) {
  const int32_t experts = static_cast<int32_t>(c.num_experts), k = static_cast<int32_t>(c.num_experts_per_tok);
  const int32_t is = static_cast<int32_t>(c.shared_expert_intermediate_size);
  const SplitActivations x = x_terms(c, T, ws);  // also for the shared expert below
  gemm_rows(m.in_proj, 0, experts, x, ws.logits_router.data(), stream);
  launch_router_topk(ws.logits_router.data(), T, experts, k, c.norm_topk_prob, ws.top_experts.data(), ws.top_weights.data(),
                     stream);
  // Everything resident: slot = expert id. NVFP4 slots: the grouped W4A16 GEMM (bf16 activations, as the
  // decode kernel). BF16 slots (checkpoints without NVFP4, the fixtures): the row kernels, fp32 activations.
  if (model.slot_layout().format == model::SlotFormat::kNvfp4) {
    launch_moe_prefill(m.pool.data(), m.scales.data(), model.slot_layout(), x.hi, ws.top_experts.data(),
                       ws.top_weights.data(), T, k, experts, ws.scratch.data(), ws.scratch.size(), ws.y.data(), stream);
  } else {
    launch_expert_gate_up(m.pool.data(), m.scales.data(), model.slot_layout(), ws.x.data(), ws.top_experts.data(), T, k,
                          ws.expert_act.data(), stream);
    launch_expert_down(m.pool.data(), m.scales.data(), model.slot_layout(), ws.expert_act.data(), ws.top_experts.data(),
                       ws.top_weights.data(), T, k, ws.y.data(), stream);
  }
  // Shared gate | up [T, 2 I_s], then the gate logits [T] behind them: two GEMMs, because one with the odd output
  // width 2 I_s + 1 ran on a slow cuBLAS kernel (~330 us per term at 4096 tokens, against ~20 for width 512).
  float* gate_up = ws.shared.data();
  float* gate_logit = gate_up + sz(T) * sz(2 * is);
  gemm_rows(m.in_proj, experts, 2 * is, x, gate_up, stream);  // fp16 copy
  gemm_rows(m.in_proj, experts + 2 * is, 1, x, gate_logit, stream);
  launch_swiglu_gated(gate_up, gate_up + is, 2 * is, gate_logit, T, is, ws.shared_act.data(), stream);
  const SplitActivations act = with_low8(split(ws.shared_act.data(), T, is, ws, stream), ws, stream);
  gemm_rows(m.shared_down, 0, m.shared_down.rows, act, ws.y.data(), stream, true);  // y += the gated shared expert
}

// The widest input of any prefill GEMM (the split GEMM's scratch).
int64_t max_gemm_inputs(const model::ModelConfig& c) {
  return std::max({c.stream_width(), c.hidden_size, c.hc_lowrank, c.gdn_value_dim(), c.num_attention_heads * c.head_dim,
                   c.ple_embed_dim, c.shared_expert_intermediate_size});
}

}  // namespace

PrefillWorkspace::PrefillWorkspace(const DeviceModel& model, int32_t max_tokens_, int64_t max_context)
    : max_tokens(max_tokens_) {
  const model::ModelConfig& c = model.config();
  const size_t T = sz(max_tokens), d = sz(c.hidden_size), width = sz(c.stream_width());
  tokens = DeviceBuffer<int32_t>(T);
  positions = DeviceBuffer<int32_t>(T);
  stream = DeviceBuffer<float>(T * width);
  normed = DeviceBuffer<float>(T * width);
  mix = DeviceBuffer<float>(T * width);
  low = DeviceBuffer<float>(T * sz(c.hc_lowrank));
  inject = DeviceBuffer<float>(T * sz(c.hc_count));
  x = DeviceBuffer<float>(T * d);
  x_terms = DeviceBuffer<float>(T * d);
  y = DeviceBuffer<float>(T * d);
  const bool gdn = std::count(c.layer_types.begin(), c.layer_types.end(), model::LayerType::kLinearAttention) > 0;
  const bool attn = std::count(c.layer_types.begin(), c.layer_types.end(), model::LayerType::kAttention) > 0;
  mixed = DeviceBuffer<float>(gdn ? T * sz(c.gdn_conv_dim()) : 1);
  conv_out = DeviceBuffer<float>(gdn ? T * sz(c.gdn_conv_dim()) : 1);
  z = DeviceBuffer<float>(gdn ? T * sz(c.gdn_value_dim()) : 1);
  b = DeviceBuffer<float>(gdn ? T * sz(c.linear_num_value_heads) : 1);
  a = DeviceBuffer<float>(gdn ? T * sz(c.linear_num_value_heads) : 1);
  core = DeviceBuffer<float>(T * sz(std::max(c.gdn_value_dim(), c.num_attention_heads * c.head_dim)));
  const size_t kv_width = sz(c.num_key_value_heads * c.head_dim);
  qg = DeviceBuffer<float>(attn ? T * sz(c.num_attention_heads * c.head_dim * 2) : 1);
  k = DeviceBuffer<float>(attn ? T * kv_width : 1);
  attention_partials = DeviceBuffer<float>(attn ? std::max<size_t>(1, attention_decode_workspace_floats(
                                                      max_tokens, static_cast<int32_t>(c.num_attention_heads),
                                                      static_cast<int32_t>(c.head_dim)))
                                                : 1);
  v = DeviceBuffer<float>(attn ? T * kv_width : 1);
  if (c.has_qsa) {
    max_selected = static_cast<int32_t>(c.block_topk() * c.indexer_compress_ratio + c.indexer_compress_ratio - 1);
    index_q = DeviceBuffer<float>(T * sz(c.indexer_n_heads * c.indexer_head_dim));
    index_k = DeviceBuffer<float>(T * sz(c.indexer_head_dim));
    selected = DeviceBuffer<int32_t>(T * sz(max_selected));
    selected_count = DeviceBuffer<int32_t>(T);
    qsa_scores = DeviceBuffer<float>(sz(c.max_position_embeddings / c.indexer_compress_ratio + 1));
    mask_words = qsa_mask_words(c, max_context);
    block_mask = DeviceBuffer<uint32_t>(T * sz(mask_words));
  }
  const size_t kk = sz(c.num_experts_per_tok);
  logits_router = DeviceBuffer<float>(T * sz(c.num_experts));
  shared = DeviceBuffer<float>(T * sz(2 * c.shared_expert_intermediate_size + 1));
  top_experts = DeviceBuffer<int32_t>(T * kk);
  top_weights = DeviceBuffer<float>(T * kk);
  shared_act = DeviceBuffer<float>(T * sz(c.shared_expert_intermediate_size));
  if (!c.ple_layer_ids.empty()) {
    ple_ids = DeviceBuffer<int64_t>(T * sz(c.ngram_heads()));
    ple_emb = DeviceBuffer<float>(T * sz(c.ple_embed_dim));
    ple_key = DeviceBuffer<float>(T * width);
    ple_value = DeviceBuffer<float>(T * d);
    ple_query = DeviceBuffer<float>(T * width);
    ple_gated = DeviceBuffer<float>(T * width);
    ple_normed = DeviceBuffer<float>(T * width);
  }
  if (model.slot_layout().format == model::SlotFormat::kBf16) {
    expert_act = DeviceBuffer<uint16_t>(T * kk * sz(model.slot_layout().padded_intermediate));
  }
  gemm_scratch = DeviceBuffer<float>(T * sz(max_gemm_inputs(c)));
  if (model.has_low_term_weights()) {
    lo8 = DeviceBuffer<uint8_t>(T * sz(max_gemm_inputs(c)));
    lo8_scales = DeviceBuffer<float>(T);
    x16 = DeviceBuffer<uint16_t>(T * sz(max_gemm_inputs(c)));
  }
  const size_t moe_bytes = moe_prefill_workspace_bytes(model.slot_layout(), max_tokens, static_cast<int32_t>(kk),
                                                       static_cast<int32_t>(c.num_experts));
  const size_t gdn_bytes = gdn ? gdn_prefill_workspace_bytes(gdn_shape(c), max_tokens) : 0;
  scratch = DeviceBuffer<uint8_t>(std::max(moe_bytes, gdn_bytes));
}

uint64_t PrefillWorkspace::bytes_for(const DeviceModel& model, int32_t tokens, int64_t max_context) {
  const model::ModelConfig& c = model.config();
  const uint64_t T = static_cast<uint64_t>(tokens);
  const uint64_t per_token_floats =
      3 * c.stream_width() + c.hc_lowrank + c.hc_count + 2 * c.hidden_size + 2 * c.gdn_conv_dim() + 2 * c.gdn_value_dim() +
      2 * c.linear_num_value_heads + c.num_attention_heads * c.head_dim * 3 + 2 * c.num_key_value_heads * c.head_dim +
      (c.indexer_n_heads + 1) * c.indexer_head_dim + c.num_experts + 3 * c.shared_expert_intermediate_size + 2 +
      2 * c.num_experts_per_tok + c.hidden_size + (c.ple_layer_ids.empty() ? 0 : c.ple_embed_dim + 4 * c.stream_width() + c.hidden_size);
  const uint64_t moe_bytes = moe_prefill_workspace_bytes(model.slot_layout(), tokens, static_cast<int32_t>(c.num_experts_per_tok),
                                                         static_cast<int32_t>(c.num_experts));
  const uint64_t gdn_bytes = gdn_prefill_workspace_bytes(gdn_shape(c), tokens);
  const uint64_t attention_bytes = 4 * attention_decode_workspace_floats(tokens, static_cast<int32_t>(c.num_attention_heads),
                                                                          static_cast<int32_t>(c.head_dim));
  const uint64_t split_bytes = 4 * T * static_cast<uint64_t>(max_gemm_inputs(c));
  // With the low-term weights: lo8 (1 byte per input) and its scale, x16 (2 bytes per input).
  const uint64_t low_term_bytes =
      model.has_low_term_weights() ? T * (3 * static_cast<uint64_t>(max_gemm_inputs(c)) + 4) : 0;
  const uint64_t expert_act_bytes = model.slot_layout().format == model::SlotFormat::kBf16
                                        ? 2 * T * static_cast<uint64_t>(c.num_experts_per_tok) * model.slot_layout().padded_intermediate
                                        : 0;
  const uint64_t mask_bytes = 4 * T * static_cast<uint64_t>(qsa_mask_words(c, max_context));
  return T * per_token_floats * 4 + std::max(moe_bytes, gdn_bytes) + attention_bytes + split_bytes + expert_act_bytes +
         mask_bytes + low_term_bytes;
}

void enqueue_prefill(const DeviceModel& model, const KvCache& kv, SequenceStateDevice& sequence, PrefillWorkspace& ws,
                     int32_t T, cudaStream_t stream) {
  const model::ModelConfig& c = model.config();
  if (T < 1 || T > ws.max_tokens) fail("internal: prefill chunk of {} tokens (workspace holds {})", T, ws.max_tokens);
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count);
  // Our kernels launch while the previous one drains (launch.h); cuBLAS's and the launches that do not go through
  // launch_kernel stay ordinary, fully ordered launches.
  const PdlScope pdl;

  // Embedding (unscaled) into every stream.
  launch_embed_streams(model.embed_tokens().data, ws.tokens.data(), T, d, S, ws.stream.data(), stream);

  // A block's write into the streams and the next read meet in one kernel (hyper_connection_write_read), except
  // where PLE changes the streams in between or no read follows.
  bool read_done = false;  // the token mixer's read already happened with the previous layer's write
  const bool bf16_slots = model.slot_layout().format != model::SlotFormat::kNvfp4;  // their kernels read fp32 x
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerDevice& ld = model.layers()[sz(layer)];
    LayerStateDevice& state = sequence.layers[sz(layer)];

    // PLE adds hashed n-gram features to the stream before the mixer block.
    if (ld.ple) ple_block(c, *ld.ple, state, ws, T, stream);

    // Token mixer: Gated DeltaNet or gated attention, read from and written back to the streams.
    if (!read_done) hyper_connection_read(c, ld.attn_hc, ws.stream.data(), /*fp32_x=*/false, T, ws, stream);
    if (ld.gdn) {
      gated_delta_net(c, *ld.gdn, state, ws, T, stream);
    } else {
      attention(c, model, *ld.attention, kv, sequence, state, ws, T, stream);
    }

    // Channel mixer: sparse MoE with the shared expert.
    hyper_connection_write_read(c, ld.mlp_hc, /*fp32_x=*/bf16_slots, T, ws, stream);
    moe_block(c, model, ld.moe, ws, T, stream);
    const LayerDevice* next = layer + 1 < c.num_hidden_layers ? &model.layers()[sz(layer + 1)] : nullptr;
    read_done = next != nullptr && !next->ple;
    if (read_done) {
      hyper_connection_write_read(c, next->attn_hc, /*fp32_x=*/false, T, ws, stream);
    } else {
      launch_hc_write(ws.y.data(), ws.inject.data(), T, S, d, ws.stream.data(), stream);
    }
  }
}

void enqueue_prefill_logits(const DeviceModel& model, PrefillWorkspace& ws, int32_t first, int32_t rows, float* logits,
                            cudaStream_t stream) {
  const model::ModelConfig& c = model.config();
  hyper_connection_read(c, model.mixer(), ws.stream.data() + sz(first) * sz(c.stream_width()),
                        /*fp32_x=*/rows == 1, rows, ws, stream);
  const DenseWeight& head = model.lm_head();
  if (rows == 1) {
    launch_gemv_bf16(head.data, ws.x.data(), 1, head.rows, head.cols, logits, stream);
  } else {
    gemm(head, x_terms(c, rows, ws), logits, stream);
  }
}

}  // namespace imp::cuda
