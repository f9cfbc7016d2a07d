// The CUDA model's decode step: one token of one sequence through all layers, mirroring cpu/forward.cpp
// step by step, as a sequence of kernel launches on one stream with no host synchronisation, so it can be
// captured as a CUDA graph and replayed. Inputs are read from the sequence's step_token and
// step_position on the device; the logits land in the workspace, the greedy token back in step_token and
// the position advances, so steps can also be chained on the device alone (benchmarks).
#pragma once

#include <cuda_runtime.h>

#include "cuda/device_model.h"
#include "cuda/memory/kv_cache.h"
#include "cuda/sequence_state.h"

namespace imp::cuda {

// A second stream and its fork / join events: a side branch of the decode step, joined into the captured graph by
// the events (the first PLE layer's token-only half beside the layers before it; each GDN or attention layer's
// output gate beside the rest of its in-projection and the kernels after it; an attention layer's QSA selection
// beside its q / k / v rows).
struct SideBranch {
  SideBranch();
  ~SideBranch();
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

// Scratch for one decode step (shared by all sequences: steps run one after another on one stream).
struct DecodeWorkspace {
  explicit DecodeWorkspace(const DeviceModel& model);

  DeviceBuffer<float> stream;     // [S*d] the hyper-connection streams
  DeviceBuffer<float> low;        // [rank + S]: low-rank mix, then the inject weights
  DeviceBuffer<float> inv_rms;    // [S]: the streams' rsqrt(mean square), for the fused read
  DeviceBuffer<float> x, y;       // [d]
  DeviceBuffer<float> proj;       // the widest stacked input projection's output
  DeviceBuffer<float> core;       // [max(value_dim, heads * hd)]
  DeviceBuffer<float> gate;       // [max(value_dim, heads * hd)]: a GDN layer's act(z), an attention layer's sigmoid(gate)
  DeviceBuffer<float> attention_partials;  // launch_attention_decode's split partials
  DeviceBuffer<float> qsa_scores;
  DeviceBuffer<int32_t> qsa_selected, qsa_count;
  DeviceBuffer<int32_t> top_experts;
  DeviceBuffer<float> top_weights;
  DeviceBuffer<uint16_t> expert_act;  // [k, padded I]
  DeviceBuffer<int64_t> ple_ids;    // [ngram heads]
  DeviceBuffer<float> ple_emb, ple_key_value, ple_query, ple_gated, ple_normed;
  DeviceBuffer<float> logits;       // [vocab]
  int32_t max_selected = 0;
  // The device's stream priority range: the output gates at the lowest, the QSA index branch at the highest, the
  // main chain between (or at the highest too, on devices with fewer than three levels).
  int priority_low = 0, priority_high = 0, priority_main = 0;
  SideBranch side;       // PLE
  SideBranch gate_side;  // output gates
  SideBranch index_side;  // the QSA indexer's rows, prep and selection (attention layers)
};

// The decode graph a step at `position` replays: kWithinBudget where every QSA selection keeps all tokens (the blocks
// fit the budget) or the model has no QSA, kBeyondBudget where the selection picks.
enum class DecodeRegime { kWithinBudget = 0, kBeyondBudget = 1 };
DecodeRegime decode_regime(const model::ModelConfig& c, int64_t position);

// Enqueues one decode step of `sequence` on `stream` (graph-capturable), for steps of the given regime (any position
// gives the same results; the regime picks how the QSA selection is placed on the SMs).
void enqueue_decode_step(const DeviceModel& model, const KvCache& kv, SequenceStateDevice& sequence,
                         DecodeWorkspace& ws, DecodeRegime regime, cudaStream_t stream);

}  // namespace imp::cuda
