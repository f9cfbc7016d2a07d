#include "cuda/forward.h"

#include <algorithm>

#include "cuda/kernels/attention_decode.h"
#include "cuda/kernels/dense.h"
#include "cuda/kernels/embedding.h"
#include "cuda/kernels/gated_delta_net.h"
#include "cuda/kernels/hyper_connection.h"
#include "cuda/kernels/moe_decode.h"
#include "cuda/kernels/moe_expert.h"
#include "cuda/kernels/moe_router.h"
#include "cuda/kernels/ngram_hash.h"
#include "cuda/kernels/ple.h"
#include "cuda/kernels/qsa.h"
#include "cuda/kernels/sampling.h"
#include "cuda/kernels/shared_expert.h"
#include "cuda/launch.h"

namespace imp::cuda {
namespace {

size_t widest_projection(const DeviceModel& model) {
  size_t widest = 1;
  for (const LayerDevice& l : model.layers()) {
    if (l.gdn) widest = std::max(widest, static_cast<size_t>(l.gdn->in_proj.rows));
    if (l.attention) widest = std::max(widest, static_cast<size_t>(l.attention->in_proj.rows));
    widest = std::max(widest, static_cast<size_t>(l.moe.in_proj.rows));
  }
  return widest;
}

void gemv(const DenseWeight& w, const float* x, float* y, cudaStream_t stream) {
  launch_gemv_bf16(w.data, x, 1, w.rows, w.cols, y, stream);
}

// Hyper-connection read (cpu::hyper_connection_read), fused into two kernels: x [d] and, with inject,
// ws.low + rank [S].
void hyper_connection_read(const model::ModelConfig& c, const HyperConnectionDevice& hc, DecodeWorkspace& ws,
                           cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count);
  const int32_t rank = static_cast<int32_t>(c.hc_lowrank);
  launch_hc_read_down(ws.stream.data(), hc.norm.data, hc.down_inject.data, hc.down_inject.rows, rank, S, d,
                      static_cast<float>(c.rms_norm_eps), ws.low.data(), ws.inv_rms.data(), stream);
  launch_hc_read_up_mix(ws.stream.data(), hc.norm.data, ws.inv_rms.data(), hc.up.data, hc.up.cols, ws.low.data(), rank, S, d,
                        ws.x.data(), stream);
}

// Capture order matters where branches join. In the decode graph, a kernel with predecessors on two branches starts
// early (PDL: launched and waiting, its weights loading) only behind the predecessor captured first; the other edge
// waits for that predecessor's end (session 36: every join in the 1K and 32K timelines behaves so). So each branch
// is captured where the predecessor that usually ends last comes first: GDN's gate GEMV (it ends after the
// recurrent step) before the main chain; the attention layer's gate GEMV (done long before the combine) after it.

// The gate branch forks where x is final (the branch's kernels may be captured later: launch_on_gate_branch).
void fork_gate_branch(DecodeWorkspace& ws, cudaStream_t stream) {
  IMP_CUDA_CHECK(cudaEventRecord(ws.gate_side.fork, stream));
}

// A mixer's output gate, made by launch(side stream) into ws.gate on the gate branch (forked by fork_gate_branch), at
// low priority, so its GEMV fills what the main chain leaves idle (the main chain's blocks go first).
template <class Launch>
void launch_on_gate_branch(DecodeWorkspace& ws, Launch launch) {
  IMP_CUDA_CHECK(cudaStreamWaitEvent(ws.gate_side.stream, ws.gate_side.fork, 0));
  {
    const LaunchPriority background(ws.priority_low);
    launch(ws.gate_side.stream);
  }
  IMP_CUDA_CHECK(cudaEventRecord(ws.gate_side.join, ws.gate_side.stream));
}

// The mixer's output projection, written straight into the streams (cpu::hyper_connection_write): ws.core times
// the gate branch's ws.gate (joined here) -> ws.stream, with the inject weights of this block's read.
void gated_out_projection_hc_write(const model::ModelConfig& c, const DenseWeight& w, DecodeWorkspace& ws,
                                   cudaStream_t stream) {
  IMP_CUDA_CHECK(cudaStreamWaitEvent(stream, ws.gate_side.join, 0));
  launch_gemv_bf16_hc_write(w.data, ws.core.data(), ws.gate.data(), w.rows, w.cols, ws.low.data() + c.hc_lowrank,
                            static_cast<int32_t>(c.hc_count), ws.stream.data(), stream);
}

// PLE (cpu::ple_block) in two halves. The token half needs only the token and the layer's n-gram context: the
// n-gram ids, the gathered rows, their key / value projection and the key norm (into ws.ple_key_value).
void ple_token_half(const model::ModelConfig& c, const PleDevice& p, LayerStateDevice& state, const int32_t* token,
                    DecodeWorkspace& ws, cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), width = static_cast<int32_t>(c.hc_count) * d;
  launch_ngram_ids(p.hash, token, 1, state.ple_context.data(), ws.ple_ids.data(), stream);
  launch_ple_gather(p.table, ws.ple_ids.data(), 1, static_cast<int32_t>(c.ngram_heads()), ws.ple_emb.data(), stream);
  gemv(p.key_value, ws.ple_emb.data(), ws.ple_key_value.data(), stream);  // keys [S*d], then the value [d]
  float* key = ws.ple_key_value.data();
  launch_rms_norm(key, p.norm_key.data, 1, width, d, static_cast<float>(c.rms_norm_eps), key, stream);
}

// The stream half: the query from the streams, the gate, the norm and the conv step, added to the streams.
void ple_stream_half(const model::ModelConfig& c, const PleDevice& p, LayerStateDevice& state, DecodeWorkspace& ws,
                     cudaStream_t stream) {
  const int32_t d = static_cast<int32_t>(c.hidden_size), S = static_cast<int32_t>(c.hc_count), width = S * d;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float* key = ws.ple_key_value.data();
  const float* value = key + width;
  launch_rms_norm(ws.stream.data(), p.norm_query.data, 1, width, d, eps, ws.ple_query.data(), stream);
  launch_ple_gate(key, ws.ple_query.data(), value, 1, S, d, ws.ple_gated.data(), stream);
  launch_rms_norm(ws.ple_gated.data(), p.norm_conv.data, 1, width, d, eps, ws.ple_normed.data(), stream);
  launch_ple_conv_step(ws.ple_gated.data(), ws.ple_normed.data(), p.conv1d.data, static_cast<int32_t>(c.ple_conv_kernel_size),
                       static_cast<int32_t>(c.ngram_size), state.ple_conv.data(), 1, width, ws.stream.data(), stream);
}

// Gated DeltaNet decode step (cpu::gated_delta_net, token by token): ws.x -> the streams.
void gated_delta_net(const model::ModelConfig& c, const GatedDeltaNetDevice& g, LayerStateDevice& state,
                     DecodeWorkspace& ws, cudaStream_t stream) {
  const GatedDeltaNetShape shape = gdn_shape(c);
  // act(z) on a side branch at low priority: it needs only x, and the recurrent step does not need it, so its rows
  // (31.5 MB of the released in_proj's 84) fill the SMs the rest of in_proj leaves in its tail, then run beside the
  // recurrent step, whose blocks go first. The output projection applies it. Measured (H200, session 13): 214.5 ->
  // 217.3 tok/s at 1K; the same kernels in one chain (z after the recurrent step, or in extra blocks of it) lost:
  // the recurrent step's loads then queue behind z's.
  fork_gate_branch(ws, stream);
  launch_on_gate_branch(ws, [&](cudaStream_t side) {
    launch_gdn_gate_act(shape, g.in_proj.data, ws.x.data(), g.in_proj.cols, ws.gate.data(), side);
  });
  // [qkv | (z) | b | a], the conv step applied to qkv.
  launch_gdn_in_proj_conv(shape, g.small, g.in_proj.data, ws.x.data(), g.in_proj.rows, g.in_proj.cols,
                          state.gdn_conv.data(), ws.proj.data(), stream);
  const float* mixed = ws.proj.data();
  const float* b = mixed + c.gdn_conv_dim() + c.gdn_value_dim();
  const float* a = b + c.linear_num_value_heads;
  launch_gdn_recurrent_step(shape, g.small, mixed, /*z=*/nullptr, b, a, state.gdn_recurrent.data(), ws.core.data(), 1,
                            stream);
  gated_out_projection_hc_write(c, g.out_proj, ws, stream);
}

// Gated attention with q/k norm, partial RoPE, paged KV and (when configured) QSA: ws.x -> the streams.
void attention(const model::ModelConfig& c, const DeviceModel& model, const AttentionDevice& a, const KvPages& pages,
               LayerStateDevice& state, const int32_t* position, DecodeWorkspace& ws, DecodeRegime regime,
               cudaStream_t stream) {
  const int32_t heads = static_cast<int32_t>(c.num_attention_heads), kv_heads = static_cast<int32_t>(c.num_key_value_heads);
  const int32_t hd = static_cast<int32_t>(c.head_dim), kv_width = kv_heads * hd, rot = static_cast<int32_t>(c.rotary_dim());
  const float eps = static_cast<float>(c.rms_norm_eps);
  // The output gate's halves of the in-projection (31.5 MB of the released 71.4) on the gate branch at low priority,
  // as GDN's act(z): beside the rest of the in-projection, prep, QSA and attention (decode +0.5%, session 13). Forked
  // here, captured after the combine (see fork_gate_branch), so the output projection starts early behind the combine.
  fork_gate_branch(ws, stream);
  // The QSA branch forks here too and is captured after the main chain's GEMV and prep, so the attention starts
  // early behind the prep (which ends last within the budget) and waits for the selection's end beyond it (session
  // 36, both capture orders: 251.4 -> 252.5 tok/s at 1K, 243.8 -> 244.2 at 32K).
  if (c.has_qsa) IMP_CUDA_CHECK(cudaEventRecord(ws.index_side.fork, stream));
  const int32_t ih = static_cast<int32_t>(c.indexer_n_heads), id = static_cast<int32_t>(c.indexer_head_dim);
  const int32_t ratio = static_cast<int32_t>(c.indexer_compress_ratio);
  const int32_t index_rows = c.has_qsa ? (ih + 1) * id : 0;  // the in-projection's last rows
  float* qg = ws.proj.data();
  float* k = qg + static_cast<size_t>(heads) * 2 * hd;
  float* v = k + kv_width;
  float* index = v + kv_width;  // [ih query heads | raw key]
  DecodePrep prep;
  prep.q_gate = qg;
  prep.q_norm = a.q_norm.data;
  prep.heads = heads;
  prep.k = k;
  prep.v = v;
  prep.k_norm = a.k_norm.data;
  prep.kv_heads = kv_heads;
  prep.head_dim = hd;
  prep.rotary_dim = rot;
  prep.cache = pages;
  prep.positions = position;
  prep.inv_freq = model.inv_freq();
  prep.eps = eps;
  // [q|(gate) per head, k, v]
  launch_gemv_bf16_without_gates(a.in_proj.data, ws.x.data(), a.in_proj.rows - index_rows, a.in_proj.cols, heads, hd,
                                 ws.proj.data(), stream);
  launch_attention_decode_prep(prep, stream);
  const int32_t* selected = nullptr;
  const int32_t* count = nullptr;
  if (c.has_qsa) {
    // The indexer's rows (640 of the released in-projection), then their prep (index query norm + RoPE, raw key,
    // block key) with the scores, and the selection, on their own branch at the highest priority, beside the rest of
    // the in-projection and the attention prep; joined before the attention. On the main chain at 32K context they
    // took ~19 us after the in-projection; beside it, its blocks and stream delayed them until the branch had the
    // highest priority (session 35: decode +0.3% at 1K, +0.85% at 32K); the prep in the score kernel took one
    // kernel boundary off the branch (session 36: +0.4% at 32K).
    QsaDecodeIndex qsa;
    qsa.index = index;
    qsa.q_norm = a.index_q_norm.data;
    qsa.k_norm = a.index_k_norm.data;
    qsa.heads = ih;
    qsa.dim = id;
    qsa.rotary_dim = rot;
    qsa.ratio = ratio;
    qsa.inv_freq = model.inv_freq();
    qsa.eps = eps;
    qsa.raw_keys = state.index_keys.data();
    qsa.block_keys = state.block_keys.data();
    qsa.positions = position;
    IMP_CUDA_CHECK(cudaStreamWaitEvent(ws.index_side.stream, ws.index_side.fork, 0));
    cudaStream_t side = ws.index_side.stream;
    const LaunchPriority urgent(ws.priority_high);
    launch_gemv_bf16(a.in_proj.data + static_cast<size_t>(a.in_proj.rows - index_rows) * a.in_proj.cols, ws.x.data(), 1,
                     index_rows, a.in_proj.cols, index, side);
    const auto cached_blocks = static_cast<int32_t>(state.block_keys.size() / static_cast<size_t>(id));
    launch_qsa_decode_select(qsa, static_cast<int32_t>(c.block_topk()), cached_blocks, ws.qsa_scores.data(),
                             ws.qsa_selected.data(), ws.qsa_count.data(), regime == DecodeRegime::kBeyondBudget, side);
    IMP_CUDA_CHECK(cudaEventRecord(ws.index_side.join, side));
    selected = ws.qsa_selected.data();
    count = ws.qsa_count.data();
  }
  // The join: the attention starts once the selection and the prep are both complete, so it loads its queries
  // after its own wait.
  if (c.has_qsa) IMP_CUDA_CHECK(cudaStreamWaitEvent(stream, ws.index_side.join, 0));
  launch_attention_decode(pages, qg, /*gate=*/nullptr, 2 * hd, position, selected, count, ws.max_selected, 1, heads, kv_heads, hd,
                          ws.attention_partials.data(), ws.core.data(), stream);
  launch_on_gate_branch(ws, [&](cudaStream_t side) {
    launch_gemv_bf16_gate_halves(a.in_proj.data, ws.x.data(), a.in_proj.cols, heads, hd, ws.gate.data(), side);
  });
  gated_out_projection_hc_write(c, a.o_proj, ws, stream);
}

// Sparse MoE with the shared expert (cpu::moe_block): ws.x -> the streams.
void moe_block(const model::ModelConfig& c, const DeviceModel& model, const MoeDevice& m, DecodeWorkspace& ws,
               cudaStream_t stream) {
  const int32_t experts = static_cast<int32_t>(c.num_experts), k = static_cast<int32_t>(c.num_experts_per_tok);
  const int32_t is = static_cast<int32_t>(c.shared_expert_intermediate_size), d = static_cast<int32_t>(c.hidden_size);
  gemv(m.in_proj, ws.x.data(), ws.proj.data(), stream);  // [router logits | shared gate | shared up | shared gate logit]
  const float* logits = ws.proj.data();
  const float* shared = logits + experts;
  const float* inject = ws.low.data() + c.hc_lowrank;
  const int32_t streams = static_cast<int32_t>(c.hc_count);
  if (model.slot_layout().format == model::SlotFormat::kNvfp4) {
    // Router + gate/up, then down + shared expert + stream write: two kernels (moe_decode.h).
    launch_moe_decode_gate_up(m.pool.data(), m.scales.data(), model.slot_layout(), ws.x.data(), logits, experts, k,
                              c.norm_topk_prob, ws.expert_act.data(), ws.top_experts.data(), ws.top_weights.data(), stream);
    launch_moe_decode_down_hc_write(m.pool.data(), experts, m.scales.data(), model.slot_layout(), ws.expert_act.data(),
                                    ws.top_experts.data(), ws.top_weights.data(), k, m.shared_down.data, shared, is,
                                    inject, streams, ws.stream.data(), stream);
    return;
  }
  // BF16 slots (checkpoints without NVFP4): the router, gate/up and down+combine, then the shared expert.
  launch_router_topk(logits, 1, experts, k, c.norm_topk_prob, ws.top_experts.data(), ws.top_weights.data(), stream);
  // Everything resident: slot = expert id.
  launch_expert_gate_up(m.pool.data(), m.scales.data(), model.slot_layout(), ws.x.data(), ws.top_experts.data(), 1, k,
                        ws.expert_act.data(), stream);
  launch_expert_down(m.pool.data(), m.scales.data(), model.slot_layout(), ws.expert_act.data(), ws.top_experts.data(),
                     ws.top_weights.data(), 1, k, ws.y.data(), stream);
  // The shared expert, its gate, and the hyper-connection write of the block's output, in one kernel.
  launch_shared_expert_hc_write(m.shared_down.data, shared, is, d, ws.y.data(), inject, streams, ws.stream.data(), stream);
}

}  // namespace

SideBranch::SideBranch() {
  IMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  IMP_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  IMP_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
}

SideBranch::~SideBranch() {
  cudaEventDestroy(join);
  cudaEventDestroy(fork);
  cudaStreamDestroy(stream);
}

DecodeWorkspace::DecodeWorkspace(const DeviceModel& model) {
  const model::ModelConfig& c = model.config();
  const size_t d = static_cast<size_t>(c.hidden_size), width = static_cast<size_t>(c.stream_width());
  stream = DeviceBuffer<float>(width);
  low = DeviceBuffer<float>(static_cast<size_t>(c.hc_lowrank + c.hc_count));
  inv_rms = DeviceBuffer<float>(static_cast<size_t>(c.hc_count));
  x = DeviceBuffer<float>(d);
  y = DeviceBuffer<float>(d);
  proj = DeviceBuffer<float>(widest_projection(model));
  core = DeviceBuffer<float>(static_cast<size_t>(std::max(c.gdn_value_dim(), c.num_attention_heads * c.head_dim)));
  gate = DeviceBuffer<float>(core.size());  // one gate value per core value
  attention_partials = DeviceBuffer<float>(std::max<size_t>(
      1, attention_decode_workspace_floats(1, static_cast<int32_t>(c.num_attention_heads), static_cast<int32_t>(c.head_dim))));
  max_selected = static_cast<int32_t>(c.has_qsa ? c.block_topk() * c.indexer_compress_ratio + c.indexer_compress_ratio - 1 : 1);
  // Scores for every block of the longest context.
  const size_t max_blocks = c.has_qsa ? static_cast<size_t>(c.max_position_embeddings / c.indexer_compress_ratio + 1) : 1;
  qsa_scores = DeviceBuffer<float>(max_blocks);
  qsa_selected = DeviceBuffer<int32_t>(static_cast<size_t>(max_selected));
  qsa_count = DeviceBuffer<int32_t>(1);
  const size_t k = static_cast<size_t>(c.num_experts_per_tok);
  top_experts = DeviceBuffer<int32_t>(k);
  top_weights = DeviceBuffer<float>(k);
  expert_act = DeviceBuffer<uint16_t>(k * static_cast<size_t>(model.slot_layout().padded_intermediate));
  const bool ple = !c.ple_layer_ids.empty();
  ple_ids = DeviceBuffer<int64_t>(ple ? static_cast<size_t>(c.ngram_heads()) : 1);
  ple_emb = DeviceBuffer<float>(ple ? static_cast<size_t>(c.ple_embed_dim) : 1);
  ple_key_value = DeviceBuffer<float>(width + d);
  ple_query = DeviceBuffer<float>(width);
  ple_gated = DeviceBuffer<float>(width);
  ple_normed = DeviceBuffer<float>(width);
  logits = DeviceBuffer<float>(static_cast<size_t>(c.vocab_size));
  IMP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&priority_low, &priority_high));
  // The main chain one level below the highest, which the QSA index branch takes (where the device has 3 levels).
  priority_main = priority_high < priority_low - 1 ? priority_high + 1 : priority_high;
}

DecodeRegime decode_regime(const model::ModelConfig& c, int64_t position) {
  if (!c.has_qsa) return DecodeRegime::kWithinBudget;
  const int64_t blocks = (position + 1) / c.indexer_compress_ratio;  // the qsa kernels' `blocks > block_topk`
  return blocks > static_cast<int64_t>(c.block_topk()) ? DecodeRegime::kBeyondBudget : DecodeRegime::kWithinBudget;
}

void enqueue_decode_step(const DeviceModel& model, const KvCache& kv, SequenceStateDevice& sequence,
                         DecodeWorkspace& ws, DecodeRegime regime, cudaStream_t stream) {
  const model::ModelConfig& c = model.config();
  const int32_t* token = sequence.step_token.data();
  const int32_t* position = sequence.step_position.data();
  const PdlScope pdl;  // each kernel's launch overlaps the previous one's tail (launch.h)
  const LaunchPriority critical(ws.priority_main);  // all but the output gates' and the QSA index branches

  // The first PLE layer's token half on the side branch, beside the layers before it (~30 us of dependent kernels
  // off the step's critical path); it joins before that layer's stream half. Later PLE layers (none in the
  // released model) share its buffers, so they run both halves in line.
  int side_ple = -1;
  for (int layer = 0; layer < c.num_hidden_layers && side_ple < 0; ++layer) {
    if (model.layers()[static_cast<size_t>(layer)].ple) side_ple = layer;
  }
  if (side_ple >= 0) {
    IMP_CUDA_CHECK(cudaEventRecord(ws.side.fork, stream));
    IMP_CUDA_CHECK(cudaStreamWaitEvent(ws.side.stream, ws.side.fork, 0));
    ple_token_half(c, *model.layers()[static_cast<size_t>(side_ple)].ple, sequence.layers[static_cast<size_t>(side_ple)],
                   token, ws, ws.side.stream);
    IMP_CUDA_CHECK(cudaEventRecord(ws.side.join, ws.side.stream));
  }

  // Embedding (unscaled) into every stream.
  launch_embed_streams(model.embed_tokens().data, token, 1, static_cast<int32_t>(c.hidden_size),
                       static_cast<int32_t>(c.hc_count), ws.stream.data(), stream);

  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerDevice& ld = model.layers()[static_cast<size_t>(layer)];
    LayerStateDevice& state = sequence.layers[static_cast<size_t>(layer)];

    // PLE adds hashed n-gram features to the stream before the mixer block.
    if (ld.ple) {
      if (layer == side_ple) {
        IMP_CUDA_CHECK(cudaStreamWaitEvent(stream, ws.side.join, 0));
      } else {
        ple_token_half(c, *ld.ple, state, token, ws, stream);
      }
      ple_stream_half(c, *ld.ple, state, ws, stream);
    }

    // Token mixer: Gated DeltaNet or gated attention, read from and written back to the streams (the output
    // projection writes them).
    hyper_connection_read(c, ld.attn_hc, ws, stream);
    if (ld.gdn) {
      gated_delta_net(c, *ld.gdn, state, ws, stream);
    } else {
      const KvPages pages = kv.pages(state.attention_index, sequence.page_table.data(), sequence.max_pages);
      attention(c, model, *ld.attention, pages, state, position, ws, regime, stream);
    }

    // Channel mixer: sparse MoE with the shared expert.
    hyper_connection_read(c, ld.mlp_hc, ws, stream);
    moe_block(c, model, ld.moe, ws, stream);
  }

  // Final mixer read (no norm after it), the LM head, the greedy token fed back, the position advanced.
  hyper_connection_read(c, model.mixer(), ws, stream);
  gemv(model.lm_head(), ws.x.data(), ws.logits.data(), stream);
  launch_argmax(ws.logits.data(), 1, static_cast<int32_t>(c.vocab_size), sequence.step_token.data(), stream);
  launch_advance_positions(sequence.step_position.data(), 1, stream);
}

}  // namespace imp::cuda
