#include "model/weights.h"

#include <cstring>
#include <set>
#include <string>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"

namespace imp::model {
namespace {

bool is_dense_dtype(DType dtype) { return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32; }

float read_scalar(const TensorInfo& tensor) {
  if (tensor.numel() != 1) fail("tensor '{}' in {} must hold one value, has shape {}", tensor.name, tensor.file, tensor.shape_string());
  switch (tensor.dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, tensor.data, sizeof value);
      return value;
    }
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, tensor.data, sizeof bits);
      return bf16_to_f32(bits);
    }
    default:
      fail("tensor '{}' in {} has dtype {}, expected F32 or BF16", tensor.name, tensor.file, dtype_name(tensor.dtype));
  }
}

std::vector<int64_t> read_i64(const TensorInfo& tensor) {
  if (tensor.dtype != DType::kI64) fail("tensor '{}' in {} has dtype {}, expected I64", tensor.name, tensor.file, dtype_name(tensor.dtype));
  std::vector<int64_t> values(static_cast<size_t>(tensor.numel()));
  std::memcpy(values.data(), tensor.data, values.size() * sizeof(int64_t));
  return values;
}

// Tracks which checkpoint tensors the model uses, so leftovers are reported instead of silently ignored.
class Binder {
 public:
  Binder(const ModelConfig& config, const Checkpoint& checkpoint) : config_(config), checkpoint_(checkpoint) {}

  Tensor any(const std::string& name) {
    const TensorInfo& tensor = checkpoint_.get(name);
    used_.insert(name);
    return &tensor;
  }

  Tensor optional(const std::string& name) {
    const TensorInfo* tensor = checkpoint_.find(name);
    if (tensor) used_.insert(name);
    return tensor;
  }

  Tensor dense(const std::string& name, std::vector<int64_t> shape) {
    Tensor tensor = any(name);
    if (!is_dense_dtype(tensor->dtype) || tensor->shape != shape) {
      fail("tensor '{}' in {} has dtype {} shape {}, expected BF16/F16/F32 [{}]", name, tensor->file,
           dtype_name(tensor->dtype), tensor->shape_string(), fmt::join(shape, ", "));
    }
    return tensor;
  }

  HyperConnectionWeights hyper_connection(const std::string& prefix, bool inject) {
    const int64_t width = config_.stream_width();
    HyperConnectionWeights hc;
    hc.norm = dense(prefix + ".hc_norm.weight", {width});
    hc.down = dense(prefix + ".input_mix_weight_down.weight", {config_.hc_lowrank, width});
    hc.up = dense(prefix + ".input_mix_weight_up.weight", {width, config_.hc_lowrank});
    if (inject) hc.inject = dense(prefix + ".block_inject_weight.weight", {config_.hc_count, width});
    return hc;
  }

  GatedDeltaNetWeights gated_delta_net(const std::string& p) {
    const ModelConfig& c = config_;
    const int64_t d = c.hidden_size, conv = c.gdn_conv_dim(), heads = c.linear_num_value_heads;
    return GatedDeltaNetWeights{
        .in_proj_qkv = dense(p + ".in_proj_qkv.weight", {conv, d}),
        .in_proj_z = dense(p + ".in_proj_z.weight", {c.gdn_value_dim(), d}),
        .in_proj_b = dense(p + ".in_proj_b.weight", {heads, d}),
        .in_proj_a = dense(p + ".in_proj_a.weight", {heads, d}),
        .conv1d = dense(p + ".conv1d.weight", {conv, 1, c.linear_conv_kernel_dim}),
        .dt_bias = dense(p + ".dt_bias", {heads}),
        .a_log = dense(p + ".A_log", {heads}),
        .norm = dense(p + ".norm.weight", {c.linear_value_head_dim}),
        .out_proj = dense(p + ".out_proj.weight", {d, c.gdn_value_dim()}),
    };
  }

  AttentionWeights attention(const std::string& p) {
    const ModelConfig& c = config_;
    const int64_t d = c.hidden_size, hd = c.head_dim;
    AttentionWeights a{
        .q_proj = dense(p + ".q_proj.weight", {c.num_attention_heads * hd * 2, d}),
        .k_proj = dense(p + ".k_proj.weight", {c.num_key_value_heads * hd, d}),
        .v_proj = dense(p + ".v_proj.weight", {c.num_key_value_heads * hd, d}),
        .o_proj = dense(p + ".o_proj.weight", {d, c.num_attention_heads * hd}),
        .q_norm = dense(p + ".q_norm.weight", {hd}),
        .k_norm = dense(p + ".k_norm.weight", {hd}),
        .indexer = std::nullopt,
    };
    if (c.has_qsa) {
      const int64_t ihd = c.indexer_head_dim;
      a.indexer = IndexerWeights{
          .qk_proj = dense(p + ".indexer.index_qk_proj.weight", {(c.indexer_n_heads + c.indexer_kv_heads) * ihd, d}),
          .q_norm = dense(p + ".indexer.q_layernorm.weight", {ihd}),
          .k_norm = dense(p + ".indexer.k_layernorm.weight", {ihd}),
      };
    }
    return a;
  }

  ExpertProjection expert_projection(const std::string& p, int64_t rows, int64_t cols, bool& nvfp4) {
    ExpertProjection proj{.rows = rows, .cols = cols};
    Tensor weight = any(p + ".weight");
    if (weight->dtype == DType::kU8) {
      if (cols % 16 != 0) fail("NVFP4 tensor '{}' in {}: input size {} is not a multiple of 16", weight->name, weight->file, cols);
      nvfp4 = true;
      proj.weight = checkpoint_.find(p + ".weight");
      const std::vector<int64_t> codes_shape{rows, cols / 2}, scale_shape{rows, cols / 16};
      checkpoint_.get(p + ".weight", DType::kU8, codes_shape);
      proj.weight_scale = &checkpoint_.get(p + ".weight_scale", DType::kF8E4M3, scale_shape);
      used_.insert(p + ".weight_scale");
      proj.weight_scale_2 = read_scalar(*any(p + ".weight_scale_2"));
      optional(p + ".input_scale");  // activation scale for W4A4 kernels; W4A16 math does not use it
    } else {
      proj.weight = dense(p + ".weight", {rows, cols});
    }
    return proj;
  }

  MoeWeights moe(const std::string& p, bool& nvfp4) {
    const ModelConfig& c = config_;
    const int64_t d = c.hidden_size, i = c.moe_intermediate_size, si = c.shared_expert_intermediate_size;
    MoeWeights m{
        .router = dense(p + ".gate.weight", {c.num_experts, d}),
        .shared_gate_proj = dense(p + ".shared_expert.gate_proj.weight", {si, d}),
        .shared_up_proj = dense(p + ".shared_expert.up_proj.weight", {si, d}),
        .shared_down_proj = dense(p + ".shared_expert.down_proj.weight", {d, si}),
        .shared_expert_gate = dense(p + ".shared_expert_gate.weight", {1, d}),
        .experts = {},
    };
    if (checkpoint_.find(p + ".experts.gate_up_proj")) {
      fail("checkpoint {}: fused expert tensors ('{}.experts.gate_up_proj') are not supported; save the model with "
           "per-expert tensors (transformers save_pretrained does)", checkpoint_.dir().string(), p);
    }
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = fmt::format("{}.experts.{}", p, e);
      m.experts.push_back(ExpertWeights{
          .gate = expert_projection(ep + ".gate_proj", i, d, nvfp4),
          .up = expert_projection(ep + ".up_proj", i, d, nvfp4),
          .down = expert_projection(ep + ".down_proj", d, i, nvfp4),
      });
    }
    return m;
  }

  PleWeights ple(const std::string& p, int ple_index) {
    const ModelConfig& c = config_;
    const int64_t width = c.stream_width(), e = c.ple_embed_dim;
    PleWeights w{
        .key_proj = dense(p + ".key_proj.weight", {width, e}),
        .value_proj = dense(p + ".value_proj.weight", {c.hidden_size, e}),
        .norm_key = dense(p + ".norm_key.weight", {width}),
        .norm_query = dense(p + ".norm_query.weight", {width}),
        .norm_conv = dense(p + ".norm_conv.weight", {width}),
        .conv1d = dense(p + ".conv1d.weight", {width, 1, c.ple_conv_kernel_size}),
        .table_shards = {},
        .rows_per_shard = 0,
        .table_scale = 1.0f,
        .hash = std::make_shared<NgramHash>(c, ple_index),
    };
    const NgramHash& hash = *w.hash;
    // The checkpoint may carry the hash constants; they must equal the derivation.
    const std::string ep = p + ".ple_embedding";
    check_buffer(ep + ".layer_multipliers", hash.multipliers());
    check_buffer(ep + ".ngram_heads_vocab_sizes", hash.vocab_sizes());
    check_buffer(ep + ".ngram_heads_offsets", hash.offsets());

    const std::string table = ep + ".ngram_embedding";
    if (Tensor whole = optional(table + ".weight")) {
      w.table_shards.push_back(whole);
    } else {
      for (int k = 0;; ++k) {
        Tensor shard = optional(fmt::format("{}.shard_{}.weight", table, k));
        if (!shard) break;
        w.table_shards.push_back(shard);
      }
      if (w.table_shards.empty()) fail("checkpoint {}: missing tensor '{}.weight' (or its shards '{}.shard_K.weight')", checkpoint_.dir().string(), table, table);
    }
    const DType table_dtype = w.table_shards.front()->dtype;
    int64_t rows = 0;
    w.rows_per_shard = w.table_shards.front()->shape.empty() ? 0 : w.table_shards.front()->shape[0];
    for (size_t k = 0; k < w.table_shards.size(); ++k) {
      Tensor shard = w.table_shards[k];
      const bool last = k + 1 == w.table_shards.size();
      if (shard->shape.size() != 2 || shard->shape[1] != c.ple_head_dim() || shard->dtype != table_dtype ||
          (!last && shard->shape[0] != w.rows_per_shard) || (last && shard->shape[0] > w.rows_per_shard)) {
        fail("n-gram table tensor '{}' in {} has dtype {} shape {}, expected {} [{} rows, {}] (shards split the rows evenly)",
             shard->name, shard->file, dtype_name(shard->dtype), shard->shape_string(), dtype_name(table_dtype),
             w.rows_per_shard, c.ple_head_dim());
      }
      rows += shard->shape[0];
    }
    if (rows < hash.total_rows()) {
      fail("n-gram table '{}' has {} rows, the hash addresses {} (padded {})", table, rows, hash.total_rows(), hash.padded_rows());
    }
    if (table_dtype == DType::kF8E4M3) {
      w.table_scale = read_scalar(*any(table + ".weight_scale"));
    } else if (!is_dense_dtype(table_dtype)) {
      fail("n-gram table '{}' has dtype {}, expected BF16/F16/F32 or F8_E4M3 with a weight_scale", table, dtype_name(table_dtype));
    }
    return w;
  }

  void check_buffer(const std::string& name, const std::vector<int64_t>& expected) {
    Tensor tensor = optional(name);
    if (!tensor) return;
    if (read_i64(*tensor) != expected) {
      fail("tensor '{}' in {} holds [{}], but the config derives [{}]; the checkpoint and config.json disagree "
           "(seed, vocab_size, ngram_vocab_size_base or ple_layer_ids)", name, tensor->file,
           fmt::join(read_i64(*tensor), ", "), fmt::join(expected, ", "));
    }
  }

  void check_all_used() const {
    for (const TensorInfo& tensor : checkpoint_.tensors()) {
      if (!used_.contains(tensor.name)) {
        fail("unexpected tensor '{}' in {}: not part of a qwen4_exp text model with this config.json",
             tensor.stored_name, tensor.file);
      }
    }
  }

 private:
  const ModelConfig& config_;
  const Checkpoint& checkpoint_;
  std::set<std::string> used_;
};

}  // namespace

ModelWeights bind_weights(const ModelConfig& config, const Checkpoint& checkpoint) {
  Binder bind(config, checkpoint);
  ModelWeights w;
  const int64_t d = config.hidden_size;
  w.embed_tokens = bind.dense("embed_tokens.weight", {config.vocab_size, d});
  w.lm_head = config.tie_word_embeddings ? w.embed_tokens
                                         : bind.dense("lm_head.weight", {config.vocab_size, d});
  w.mixer = bind.hyper_connection("hyper_connection_mixer", false);
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string p = fmt::format("layers.{}", layer);
    LayerWeights lw;
    lw.type = config.layer_types[static_cast<size_t>(layer)];
    lw.attn_hc = bind.hyper_connection(p + ".attn_hyper_connection", true);
    lw.mlp_hc = bind.hyper_connection(p + ".mlp_hyper_connection", true);
    if (lw.type == LayerType::kLinearAttention) {
      lw.gdn = bind.gated_delta_net(p + ".linear_attn");
    } else {
      lw.attention = bind.attention(p + ".self_attn");
    }
    lw.moe = bind.moe(p + ".mlp", w.experts_nvfp4);
    if (const int ple_index = config.ple_index(layer); ple_index >= 0) lw.ple = bind.ple(p + ".ple", ple_index);
    w.layers.push_back(std::move(lw));
  }
  bind.check_all_used();
  return w;
}

}  // namespace imp::model
