// Typed views of a checkpoint by role: what each layer needs, with every dtype and shape checked when
// the model is bound, and any tensor the model does not use reported as unexpected. No data is copied;
// views point into the memory-mapped checkpoint. Both backends build on this.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/ngram_hash.h"

namespace imp::model {

using Tensor = const TensorInfo*;

// A routed-expert projection W [rows, cols]: dense (BF16/F16/F32) or NVFP4 (ModelOpt layout).
struct ExpertProjection {
  Tensor weight = nullptr;        // dense [rows, cols] or U8 codes [rows, cols/2]
  Tensor weight_scale = nullptr;  // NVFP4 only: E4M3 [rows, cols/16]
  float weight_scale_2 = 1.0f;    // NVFP4 only
  int64_t rows = 0;
  int64_t cols = 0;
  bool nvfp4() const { return weight_scale != nullptr; }
};

struct ExpertWeights {
  ExpertProjection gate, up, down;
};

struct HyperConnectionWeights {
  Tensor norm = nullptr;    // [S*d]
  Tensor down = nullptr;    // [lowrank, S*d]
  Tensor up = nullptr;      // [S*d, lowrank]
  Tensor inject = nullptr;  // [S, S*d]; absent on the final mixer
};

struct GatedDeltaNetWeights {
  Tensor in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, dt_bias, a_log, norm, out_proj;
};

struct IndexerWeights {
  Tensor qk_proj, q_norm, k_norm;
};

struct AttentionWeights {
  Tensor q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  std::optional<IndexerWeights> indexer;
};

struct MoeWeights {
  Tensor router;  // [E, d]
  Tensor shared_gate_proj, shared_up_proj, shared_down_proj, shared_expert_gate;
  std::vector<ExpertWeights> experts;
};

struct PleWeights {
  Tensor key_proj, value_proj, norm_key, norm_query, norm_conv, conv1d;
  // The n-gram table as stored: one tensor or contiguous row-range shards, BF16/F16/F32 or FP8 E4M3.
  std::vector<Tensor> table_shards;
  int64_t rows_per_shard = 0;
  float table_scale = 1.0f;  // FP8 tables only: the BF16 weight_scale
  std::shared_ptr<const NgramHash> hash;
};

struct LayerWeights {
  LayerType type = LayerType::kLinearAttention;
  HyperConnectionWeights attn_hc, mlp_hc;
  std::optional<GatedDeltaNetWeights> gdn;
  std::optional<AttentionWeights> attention;
  MoeWeights moe;
  std::optional<PleWeights> ple;
};

struct ModelWeights {
  Tensor embed_tokens = nullptr;  // [V, d]
  Tensor lm_head = nullptr;       // [V, d]
  HyperConnectionWeights mixer;
  std::vector<LayerWeights> layers;
  bool experts_nvfp4 = false;
};

// Binds and validates; throws imp::Error naming the tensor and file on a missing, mis-shaped or
// unexpected tensor.
ModelWeights bind_weights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace imp::model
