#include "model/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace imp::model {
namespace {

using nlohmann::json;

// Sizes are multiplied together for derived dimensions; capping each at 2^31 keeps every product of two
// inside int64 and rejects garbage long before an allocation would.
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

// A JSON object plus where it sits in config.json, so messages can say "text_config.hidden_size".
struct Source {
  const json& object;
  std::string prefix;
};

std::string_view kind_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "float";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "unsupported value";
  }
}

[[noreturn]] void type_error(const std::string& name, std::string_view expected, const json& value) {
  fail("config.json: field '{}' must be {}, got {}", name, expected, kind_of(value));
}

// nullptr when the key is absent.
const json* find(const Source& src, const char* key) {
  const auto it = src.object.find(key);
  return it == src.object.end() ? nullptr : &*it;
}

// nullptr when the key is absent or null (for the fields HF declares `X | None`).
const json* find_set(const Source& src, const char* key) {
  const json* value = find(src, key);
  return value && !value->is_null() ? value : nullptr;
}

int64_t as_int(const std::string& name, const json& value) {
  if (value.is_number_unsigned()) {
    const auto raw = value.get<uint64_t>();
    if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("config.json: field '{}' is out of range (got {})", name, raw);
    }
    return static_cast<int64_t>(raw);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  type_error(name, "an integer", value);
}

// read(): absent keeps the default; null or a wrong type is an error (HF's strict dataclass agrees).
void read(const Source& src, const char* key, int64_t& out) {
  if (const json* value = find(src, key)) out = as_int(src.prefix + key, *value);
}

void read(const Source& src, const char* key, double& out) {
  const json* value = find(src, key);
  if (!value) return;
  if (!value->is_number()) type_error(src.prefix + key, "a number", *value);
  out = value->get<double>();
}

void read(const Source& src, const char* key, bool& out) {
  const json* value = find(src, key);
  if (!value) return;
  if (!value->is_boolean()) type_error(src.prefix + key, "a boolean", *value);
  out = value->get<bool>();
}

void read(const Source& src, const char* key, std::string& out) {
  const json* value = find(src, key);
  if (!value) return;
  if (!value->is_string()) type_error(src.prefix + key, "a string", *value);
  out = value->get<std::string>();
}

std::optional<int64_t> read_optional_int(const Source& src, const char* key) {
  const json* value = find_set(src, key);
  if (!value) return std::nullopt;
  return as_int(src.prefix + key, *value);
}

std::vector<int64_t> read_int_list(const Source& src, const char* key) {
  std::vector<int64_t> result;
  const json* value = find_set(src, key);
  if (!value) return result;
  if (!value->is_array()) type_error(src.prefix + key, "a list of integers", *value);
  for (size_t i = 0; i < value->size(); ++i) {
    result.push_back(as_int(fmt::format("{}{}[{}]", src.prefix, key, i), (*value)[i]));
  }
  return result;
}

// Token ids may be one integer or a list of them.
std::vector<int64_t> read_token_ids(const Source& src, const char* key) {
  const json* value = find_set(src, key);
  if (!value) return {};
  if (value->is_array()) return read_int_list(src, key);
  if (!value->is_number_integer()) type_error(src.prefix + key, "an integer or a list of integers", *value);
  return {as_int(src.prefix + key, *value)};
}

template <typename T>
void require(bool ok, const std::string& prefix, std::string_view field, std::string_view what, const T& got) {
  if (!ok) fail("config.json: {}{}: {} (got {})", prefix, field, what, got);
}

void check_size(const std::string& prefix, std::string_view field, int64_t value, int64_t min = 1) {
  require(value >= min, prefix, field, fmt::format("must be >= {}", min), value);
  require(value <= kMaxSize, prefix, field, "is implausibly large, must be < 2^31", value);
}

std::string in_quotes(std::string_view text) { return fmt::format("\"{}\"", text); }

// HF maps every non-linear name it has ever used onto its one attention layer (attention + QSA indexer
// when the indexer_* fields are set).
constexpr std::array<std::string_view, 6> kLayerTypeNames = {
    "linear_attention",          "full_attention", "indexed_attention", "qwen_sparse_attention",
    "deepseek_sparse_attention", "hybrid_indexed",
};

std::optional<LayerType> layer_type_from_name(std::string_view name) {
  if (name == kLayerTypeNames[0]) return LayerType::kLinearAttention;
  if (std::find(kLayerTypeNames.begin(), kLayerTypeNames.end(), name) != kLayerTypeNames.end()) {
    return LayerType::kAttention;
  }
  return std::nullopt;
}

void read_rope(const Source& src, ModelConfig& cfg) {
  // Legacy top-level values; rope_parameters (or the older rope_scaling) overrides them, as in HF.
  read(src, "rope_theta", cfg.rope_theta);
  read(src, "partial_rotary_factor", cfg.partial_rotary_factor);

  const char* key = "rope_parameters";
  const json* params = find_set(src, key);
  if (!params) {
    key = "rope_scaling";
    params = find_set(src, key);
  }
  if (!params) return;
  const std::string prefix = src.prefix + key;
  if (!params->is_object()) type_error(prefix, "an object", *params);
  for (const auto& [name, value] : params->items()) {
    // Per-layer-type RoPE nests one dict per layer type; no qwen4_exp checkpoint does that.
    require(!value.is_object(), prefix + ".", name, "per-layer-type RoPE parameters are not supported",
            "an object");
  }
  const Source rope{*params, prefix + "."};
  if (find(rope, "rope_type")) {
    read(rope, "rope_type", cfg.rope_type);
  } else {
    read(rope, "type", cfg.rope_type);  // pre-v5 spelling
  }
  read(rope, "rope_theta", cfg.rope_theta);
  read(rope, "partial_rotary_factor", cfg.partial_rotary_factor);
  // mrope_section / mrope_interleaved only matter for image/video positions: text positions are equal
  // on all three axes, which makes M-RoPE plain RoPE.
  require(cfg.rope_type == "default", prefix + ".", "rope_type",
          "unsupported rope_type, only \"default\" is supported", in_quotes(cfg.rope_type));
}

void read_layer_types(const Source& src, ModelConfig& cfg) {
  std::vector<std::string> names;
  if (const json* value = find_set(src, "layer_types")) {
    if (!value->is_array()) type_error(src.prefix + "layer_types", "a list of strings", *value);
    for (size_t i = 0; i < value->size(); ++i) {
      const json& item = (*value)[i];
      if (!item.is_string()) type_error(fmt::format("{}layer_types[{}]", src.prefix, i), "a string", item);
      names.push_back(item.get<std::string>());
    }
  } else {
    int64_t interval = 4;
    read(src, "full_attention_interval", interval);
    check_size(src.prefix, "full_attention_interval", interval);
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      names.emplace_back((i + 1) % interval != 0 ? "linear_attention" : "full_attention");
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const auto type = layer_type_from_name(names[i]);
    require(type.has_value(), src.prefix, fmt::format("layer_types[{}]", i),
            fmt::format("unsupported layer type (accepted: {})", fmt::join(kLayerTypeNames, ", ")),
            in_quotes(names[i]));
    cfg.layer_types.push_back(*type);
  }
  require(static_cast<int64_t>(cfg.layer_types.size()) == cfg.num_hidden_layers, src.prefix, "layer_types",
          fmt::format("must have num_hidden_layers = {} entries", cfg.num_hidden_layers), cfg.layer_types.size());
}

void validate_core(const std::string& p, const ModelConfig& cfg) {
  check_size(p, "vocab_size", cfg.vocab_size);
  check_size(p, "hidden_size", cfg.hidden_size);
  check_size(p, "num_hidden_layers", cfg.num_hidden_layers);
  check_size(p, "num_attention_heads", cfg.num_attention_heads);
  check_size(p, "num_key_value_heads", cfg.num_key_value_heads);
  check_size(p, "head_dim", cfg.head_dim);
  check_size(p, "max_position_embeddings", cfg.max_position_embeddings);
  check_size(p, "linear_conv_kernel_dim", cfg.linear_conv_kernel_dim);
  check_size(p, "linear_key_head_dim", cfg.linear_key_head_dim);
  check_size(p, "linear_value_head_dim", cfg.linear_value_head_dim);
  check_size(p, "linear_num_key_heads", cfg.linear_num_key_heads);
  check_size(p, "linear_num_value_heads", cfg.linear_num_value_heads);
  check_size(p, "num_experts", cfg.num_experts);
  check_size(p, "moe_intermediate_size", cfg.moe_intermediate_size);
  check_size(p, "shared_expert_intermediate_size", cfg.shared_expert_intermediate_size);
  check_size(p, "hc_count", cfg.hc_count, 2);  // one stream would make the hyper-connections degenerate
  check_size(p, "hc_lowrank", cfg.hc_lowrank);

  require(cfg.num_experts_per_tok >= 1 && cfg.num_experts_per_tok <= cfg.num_experts, p, "num_experts_per_tok",
          fmt::format("must be in [1, num_experts = {}]", cfg.num_experts), cfg.num_experts_per_tok);
  require(cfg.num_attention_heads % cfg.num_key_value_heads == 0, p, "num_key_value_heads",
          fmt::format("must divide num_attention_heads = {}", cfg.num_attention_heads), cfg.num_key_value_heads);
  require(cfg.linear_num_value_heads % cfg.linear_num_key_heads == 0, p, "linear_num_key_heads",
          fmt::format("must divide linear_num_value_heads = {}", cfg.linear_num_value_heads),
          cfg.linear_num_key_heads);

  require(std::isfinite(cfg.rms_norm_eps) && cfg.rms_norm_eps >= 0, p, "rms_norm_eps",
          "must be a finite number >= 0", cfg.rms_norm_eps);
  require(cfg.hidden_act == "silu", p, "hidden_act", "only \"silu\" is supported", in_quotes(cfg.hidden_act));
  require(!cfg.attention_bias, p, "attention_bias", "attention biases are not supported (qwen4_exp has none)", "true");
  require(cfg.output_gate_type == "sigmoid" || cfg.output_gate_type == "silu", p, "output_gate_type",
          "must be \"sigmoid\" or \"silu\"", in_quotes(cfg.output_gate_type));
}

void validate_rope(const std::string& p, const ModelConfig& cfg) {
  require(std::isfinite(cfg.rope_theta) && cfg.rope_theta > 0, p, "rope_theta", "must be a finite number > 0",
          cfg.rope_theta);
  // Checked before rotary_dim() so the float-to-int conversion is defined.
  require(cfg.partial_rotary_factor > 0 && cfg.partial_rotary_factor <= 1, p, "partial_rotary_factor",
          "must be in (0, 1]", cfg.partial_rotary_factor);
  const int64_t rotary = cfg.rotary_dim();
  require(rotary > 0 && rotary % 2 == 0, p, "partial_rotary_factor",
          fmt::format("rotary_dim = int(head_dim {} * factor {}) must be even and > 0", cfg.head_dim,
                      cfg.partial_rotary_factor),
          rotary);
  require(rotary <= cfg.head_dim, p, "partial_rotary_factor",
          fmt::format("rotary_dim must be <= head_dim = {}", cfg.head_dim), rotary);
}

void validate_qsa(const std::string& p, const ModelConfig& cfg) {
  if (!cfg.has_qsa) return;
  check_size(p, "indexer_n_heads", cfg.indexer_n_heads);
  check_size(p, "indexer_kv_heads", cfg.indexer_kv_heads);
  check_size(p, "indexer_head_dim", cfg.indexer_head_dim);
  check_size(p, "indexer_budget", cfg.indexer_budget);
  check_size(p, "indexer_compress_ratio", cfg.indexer_compress_ratio);
  require(cfg.indexer_kv_heads == 1, p, "indexer_kv_heads", "QSA requires exactly one indexer key head",
          cfg.indexer_kv_heads);
  require(cfg.indexer_budget % cfg.indexer_compress_ratio == 0, p, "indexer_budget",
          fmt::format("must be divisible by indexer_compress_ratio = {}", cfg.indexer_compress_ratio),
          cfg.indexer_budget);
  require(cfg.rotary_dim() <= cfg.indexer_head_dim, p, "indexer_head_dim",
          fmt::format("must be >= rotary_dim = {} (the indexer applies the attention RoPE)", cfg.rotary_dim()),
          cfg.indexer_head_dim);
}

void validate_ple(const std::string& p, const ModelConfig& cfg) {
  if (cfg.ple_layer_ids.empty()) return;
  check_size(p, "ngram_size", cfg.ngram_size, 2);
  check_size(p, "heads_per_ngram", cfg.heads_per_ngram);
  check_size(p, "ple_embed_dim", cfg.ple_embed_dim);
  check_size(p, "ple_conv_kernel_size", cfg.ple_conv_kernel_size);
  check_size(p, "ngram_vocab_size_base", cfg.ngram_vocab_size_base, 2);
  check_size(p, "make_ngram_vocab_size_divisible_by", cfg.make_ngram_vocab_size_divisible_by);
  check_size(p, "split_ngram_parts", cfg.split_ngram_parts);
  require(cfg.ple_embed_dim % cfg.ngram_heads() == 0, p, "ple_embed_dim",
          fmt::format("must be divisible by the n-gram head count (ngram_size - 1) * heads_per_ngram = {}",
                      cfg.ngram_heads()),
          cfg.ple_embed_dim);
  const std::string ids = fmt::format("[{}]", fmt::join(cfg.ple_layer_ids, ", "));
  for (const int64_t id : cfg.ple_layer_ids) {
    require(id >= 1 && id <= cfg.num_hidden_layers, p, "ple_layer_ids",
            fmt::format("ids are 1-indexed and must be in [1, num_hidden_layers = {}]; {} is not",
                        cfg.num_hidden_layers, id),
            ids);
    require(cfg.layer_types[static_cast<size_t>(id - 1)] == LayerType::kLinearAttention, p, "ple_layer_ids",
            fmt::format("PLE is only supported on linear_attention layers; id {} (layer {}) is attention", id, id - 1),
            ids);
  }
  for (const int64_t id : cfg.eos_token_ids) {
    require(id >= 0, p, "eos_token_id", "token ids must be >= 0", id);
  }
  require(!cfg.eos_token_ids.empty(), p, "eos_token_id",
          fmt::format("must be set when PLE is enabled (ple_layer_ids = {})", ids), "none");
}

}  // namespace

int ModelConfig::ple_index(int layer) const {
  const auto it = std::find(ple_layer_ids.begin(), ple_layer_ids.end(), static_cast<int64_t>(layer) + 1);
  return it == ple_layer_ids.end() ? -1 : static_cast<int>(it - ple_layer_ids.begin());
}

const char* layer_type_name(LayerType type) {
  switch (type) {
    case LayerType::kLinearAttention: return "linear_attention";
    case LayerType::kAttention: return "full_attention";
  }
  return "unknown";
}

ModelConfig parse_config(const nlohmann::json& root) {
  if (!root.is_object()) fail("config.json: the top level must be a JSON object, got {}", kind_of(root));
  const Source top{root, ""};
  ModelConfig cfg;

  if (const json* archs = find_set(top, "architectures")) {
    if (!archs->is_array()) type_error("architectures", "a list of strings", *archs);
    if (!archs->empty()) {
      if (!archs->front().is_string()) type_error("architectures[0]", "a string", archs->front());
      cfg.architecture = archs->front().get<std::string>();
    }
  }

  std::string model_type;
  const json* model_type_value = find(top, "model_type");
  if (!model_type_value) fail("config.json: model_type: missing (expected \"qwen4_exp\" or \"qwen4_exp_text\")");
  read(top, "model_type", model_type);

  const json* text = &root;
  std::string prefix;
  if (model_type == "qwen4_exp") {
    text = find_set(top, "text_config");
    if (!text) fail("config.json: text_config: missing (model_type \"qwen4_exp\" keeps the text model there)");
    if (!text->is_object()) type_error("text_config", "an object", *text);
    prefix = "text_config.";
    if (const json* inner = find(Source{*text, prefix}, "model_type")) {
      require(inner->is_string() && inner->get<std::string>() == "qwen4_exp_text", prefix, "model_type",
              "must be \"qwen4_exp_text\"", inner->dump());
    }
  } else if (model_type != "qwen4_exp_text") {
    fail("config.json: model_type: unsupported model_type \"{}\" (expected \"qwen4_exp\" or \"qwen4_exp_text\")",
         model_type);
  }
  const Source src{*text, prefix};

  read(src, "vocab_size", cfg.vocab_size);
  read(src, "hidden_size", cfg.hidden_size);
  read(src, "num_hidden_layers", cfg.num_hidden_layers);
  read(src, "num_attention_heads", cfg.num_attention_heads);
  read(src, "num_key_value_heads", cfg.num_key_value_heads);
  read(src, "head_dim", cfg.head_dim);
  read(src, "hidden_act", cfg.hidden_act);
  read(src, "max_position_embeddings", cfg.max_position_embeddings);
  read(src, "rms_norm_eps", cfg.rms_norm_eps);
  read(src, "attention_bias", cfg.attention_bias);
  // The conditional-generation wrapper owns lm_head, so its flag wins over the text config's.
  read(src, "tie_word_embeddings", cfg.tie_word_embeddings);
  if (!prefix.empty()) read(top, "tie_word_embeddings", cfg.tie_word_embeddings);

  read_rope(src, cfg);

  read(src, "linear_conv_kernel_dim", cfg.linear_conv_kernel_dim);
  read(src, "linear_key_head_dim", cfg.linear_key_head_dim);
  read(src, "linear_value_head_dim", cfg.linear_value_head_dim);
  read(src, "linear_num_key_heads", cfg.linear_num_key_heads);
  read(src, "linear_num_value_heads", cfg.linear_num_value_heads);
  cfg.output_gate_type.clear();
  if (find_set(src, "output_gate_type")) read(src, "output_gate_type", cfg.output_gate_type);
  if (cfg.output_gate_type.empty()) cfg.output_gate_type = cfg.hidden_act;  // HF: output_gate_type or hidden_act

  read(src, "num_experts", cfg.num_experts);
  read(src, "num_experts_per_tok", cfg.num_experts_per_tok);
  read(src, "moe_intermediate_size", cfg.moe_intermediate_size);
  read(src, "shared_expert_intermediate_size", cfg.shared_expert_intermediate_size);
  read(src, "norm_topk_prob", cfg.norm_topk_prob);

  read(src, "hc_count", cfg.hc_count);
  read(src, "hc_lowrank", cfg.hc_lowrank);

  cfg.ple_layer_ids = read_int_list(src, "ple_layer_ids");
  std::sort(cfg.ple_layer_ids.begin(), cfg.ple_layer_ids.end());
  cfg.ple_layer_ids.erase(std::unique(cfg.ple_layer_ids.begin(), cfg.ple_layer_ids.end()), cfg.ple_layer_ids.end());
  cfg.ple_embed_dim = read_optional_int(src, "ple_embed_dim").value_or(cfg.hidden_size);
  read(src, "ple_conv_kernel_size", cfg.ple_conv_kernel_size);
  read(src, "ngram_size", cfg.ngram_size);
  read(src, "heads_per_ngram", cfg.heads_per_ngram);
  read(src, "ngram_vocab_size_base", cfg.ngram_vocab_size_base);
  read(src, "make_ngram_vocab_size_divisible_by", cfg.make_ngram_vocab_size_divisible_by);
  read(src, "seed", cfg.seed);
  read(src, "split_ngram_parts", cfg.split_ngram_parts);

  // QSA: all five or none.
  static constexpr std::array<const char*, 5> kQsaFields = {
      "indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio"};
  std::array<int64_t*, 5> qsa_out = {&cfg.indexer_n_heads, &cfg.indexer_kv_heads, &cfg.indexer_head_dim,
                                     &cfg.indexer_budget, &cfg.indexer_compress_ratio};
  std::vector<std::string_view> missing;
  for (size_t i = 0; i < kQsaFields.size(); ++i) {
    if (const auto value = read_optional_int(src, kQsaFields[i])) {
      *qsa_out[i] = *value;
    } else {
      missing.push_back(kQsaFields[i]);
    }
  }
  cfg.has_qsa = missing.size() < kQsaFields.size();
  if (cfg.has_qsa && !missing.empty()) {
    std::vector<std::string_view> present;
    for (const char* field : kQsaFields) {
      if (std::find(missing.begin(), missing.end(), field) == missing.end()) present.push_back(field);
    }
    fail("config.json: {}{}: the QSA indexer fields must be all set or all absent; missing {} (got only {})",
         prefix, missing.front(), fmt::join(missing, ", "), fmt::join(present, ", "));
  }

  cfg.eos_token_ids = read_token_ids(src, "eos_token_id");
  const auto bos = read_token_ids(src, "bos_token_id");
  if (!bos.empty()) {
    require(bos.front() >= 0, prefix, "bos_token_id", "token ids must be >= 0", bos.front());
    cfg.bos_token_id = bos.front();
  }

  // Layer count first: layer_types is derived from it and ple_layer_ids indexes it.
  validate_core(prefix, cfg);
  read_layer_types(src, cfg);
  validate_rope(prefix, cfg);
  validate_qsa(prefix, cfg);
  validate_ple(prefix, cfg);
  return cfg;
}

ModelConfig load_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail("{}: not found (a model folder needs the Hugging Face config.json)", path.string());
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot be opened for reading", path.string());
  json root;
  try {
    root = json::parse(file);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
  try {
    return parse_config(root);
  } catch (const Error& e) {
    // parse_config names the file "config.json"; give the full path instead.
    std::string_view message = e.what();
    constexpr std::string_view kFile = "config.json: ";
    if (message.starts_with(kFile)) message.remove_prefix(kFile.size());
    fail("{}: {}", path.string(), message);
  }
}

}  // namespace imp::model
