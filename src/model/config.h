// The qwen4_exp text-model configuration: every field of the Hugging Face config that changes the math,
// parsed from config.json (flat Qwen4ExpForCausalLM or nested under text_config for
// Qwen4ExpForConditionalGeneration) and validated with the same rules as the reference.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace imp::model {

enum class LayerType { kLinearAttention, kAttention };

struct ModelConfig {
  std::string architecture;  // as written in config.json, e.g. "Qwen4ExpForCausalLM"
  int64_t vocab_size = 248320;
  int64_t hidden_size = 2048;
  int64_t num_hidden_layers = 40;
  int64_t num_attention_heads = 16;
  int64_t num_key_value_heads = 2;
  int64_t head_dim = 256;
  std::string hidden_act = "silu";
  int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;

  // RoPE
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;
  std::string rope_type = "default";

  // Gated DeltaNet
  int64_t linear_conv_kernel_dim = 4;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_num_key_heads = 16;
  int64_t linear_num_value_heads = 32;
  std::string output_gate_type = "silu";  // resolved: output_gate_type or hidden_act

  // MoE
  int64_t num_experts = 512;
  int64_t num_experts_per_tok = 10;
  int64_t moe_intermediate_size = 512;
  int64_t shared_expert_intermediate_size = 512;
  bool norm_topk_prob = true;

  // Hyper-connections
  int64_t hc_count = 4;
  int64_t hc_lowrank = 320;

  // PLE (hashed n-gram embedding). ple_layer_ids are 1-indexed, sorted, unique.
  std::vector<int64_t> ple_layer_ids;
  int64_t ple_embed_dim = 0;  // resolved: defaults to hidden_size
  int64_t ple_conv_kernel_size = 4;
  int64_t ngram_size = 3;
  int64_t heads_per_ngram = 8;
  int64_t ngram_vocab_size_base = 20000000;
  int64_t make_ngram_vocab_size_divisible_by = 128;
  int64_t seed = 1234;
  int64_t split_ngram_parts = 512;

  // QSA indexer: all set or all absent (has_qsa).
  bool has_qsa = false;
  int64_t indexer_n_heads = 0;
  int64_t indexer_kv_heads = 0;
  int64_t indexer_head_dim = 0;
  int64_t indexer_budget = 0;
  int64_t indexer_compress_ratio = 0;

  std::vector<LayerType> layer_types;
  std::vector<int64_t> eos_token_ids;  // first one is the PLE EOS
  int64_t bos_token_id = -1;           // -1: absent

  // Derived sizes.
  int64_t rotary_dim() const { return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor); }
  int64_t stream_width() const { return hc_count * hidden_size; }
  int64_t gdn_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t gdn_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }
  int64_t ngram_heads() const { return (ngram_size - 1) * heads_per_ngram; }
  int64_t ple_head_dim() const { return ple_embed_dim / ngram_heads(); }
  int64_t ple_conv_state_rows() const { return (ple_conv_kernel_size - 1) * ngram_size; }
  int64_t ple_eos() const { return eos_token_ids.empty() ? -1 : eos_token_ids.front(); }
  // Index of layer `layer` in ple_layer_ids, or -1 if it has no PLE block.
  int ple_index(int layer) const;
  int64_t block_topk() const { return has_qsa ? indexer_budget / indexer_compress_ratio : 0; }
};

// Parses and validates; throws imp::Error naming the field on any violation.
ModelConfig parse_config(const nlohmann::json& json);
ModelConfig load_config(const std::filesystem::path& model_dir);

const char* layer_type_name(LayerType type);

}  // namespace imp::model
