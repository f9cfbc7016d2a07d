// config.json parsing and validation for qwen4_exp: the released Qwen3.8-Flash-Next config, the flat
// text-only form, layer-type names, defaults, and one clear error per validation rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

namespace imp::model {
namespace {

using nlohmann::json;

// text_config of Qwen/Qwen3.8-Flash-Next (spec §1.1), inside the multimodal wrapper it ships with.
// Fields the text model ignores (mtp, vision, router loss) are kept to prove they are ignored.
constexpr const char* kReleasedConfig = R"({
  "architectures": ["Qwen4ExpForConditionalGeneration"],
  "model_type": "qwen4_exp",
  "image_token_id": 248056,
  "tie_word_embeddings": false,
  "vision_config": {"model_type": "qwen4_exp_vision", "depth": 27, "hidden_size": 1152},
  "text_config": {
    "model_type": "qwen4_exp_text",
    "vocab_size": 248320,
    "hidden_size": 2560,
    "num_hidden_layers": 48,
    "full_attention_interval": 4,
    "layer_types": [
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"
    ],
    "num_attention_heads": 24,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "attention_bias": false,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 48,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "output_gate_type": "sigmoid",
    "hidden_act": "silu",
    "mamba_ssm_dtype": "float32",
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 640,
    "shared_expert_intermediate_size": 640,
    "router_aux_loss_coef": 0.001,
    "rms_norm_eps": 1e-06,
    "hc_count": 4,
    "hc_lowrank": 320,
    "ple_layer_ids": [2],
    "ple_embed_dim": 2560,
    "ple_conv_kernel_size": 4,
    "ngram_size": 3,
    "heads_per_ngram": 8,
    "ngram_vocab_size_base": 20000000,
    "make_ngram_vocab_size_divisible_by": 128,
    "split_ngram_parts": 128,
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
    "max_position_embeddings": 262144,
    "rope_parameters": {
      "rope_type": "default",
      "rope_theta": 10000000,
      "partial_rotary_factor": 0.25,
      "mrope_section": [11, 11, 10],
      "mrope_interleaved": true
    },
    "eos_token_id": 248044,
    "bos_token_id": 248044,
    "pad_token_id": null,
    "tie_word_embeddings": false,
    "mtp": {"hybrid": true, "layer_types": ["full_attention"], "num_hidden_layers": 1, "rope_theta": 10000000},
    "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": false
  }
})";

json released() { return json::parse(kReleasedConfig); }

// The released text model as a flat Qwen4ExpForCausalLM config.
json released_flat() {
  json flat = released()["text_config"];
  flat["architectures"] = {"Qwen4ExpForCausalLM"};
  return flat;
}

// Parses a config that must be rejected and returns the message.
std::string error_of(const json& config) {
  try {
    parse_config(config);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "config was accepted: " << config.dump();
  return "";
}

// The error must be one line that starts with the file and names every fragment.
::testing::AssertionResult names(const std::string& message, std::initializer_list<std::string> fragments) {
  if (!message.starts_with("config.json: ") || message.find('\n') != std::string::npos) {
    return ::testing::AssertionFailure() << "not a one-line config.json error: " << message;
  }
  for (const auto& fragment : fragments) {
    if (message.find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << fragment << "' missing from: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

// Sets text_config fields of the released config and returns the error.
std::string error_with(std::initializer_list<std::pair<const char*, json>> fields) {
  json config = released();
  for (const auto& [key, value] : fields) config["text_config"][key] = value;
  return error_of(config);
}

TEST(ConfigReleased, ParsesWithDerivedSizes) {
  const ModelConfig c = parse_config(released());
  EXPECT_EQ(c.architecture, "Qwen4ExpForConditionalGeneration");
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_type, "default");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.output_gate_type, "sigmoid");
  EXPECT_EQ(c.num_experts, 512);
  EXPECT_EQ(c.num_experts_per_tok, 10);
  EXPECT_EQ(c.moe_intermediate_size, 640);
  EXPECT_EQ(c.shared_expert_intermediate_size, 640);
  EXPECT_TRUE(c.norm_topk_prob);  // absent -> HF default
  EXPECT_EQ(c.seed, 1234);        // absent -> HF default
  EXPECT_EQ(c.split_ngram_parts, 128);
  EXPECT_EQ(c.ple_layer_ids, std::vector<int64_t>{2});
  EXPECT_TRUE(c.has_qsa);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{248044});
  EXPECT_EQ(c.bos_token_id, 248044);

  EXPECT_EQ(c.stream_width(), 10240);
  EXPECT_EQ(c.gdn_key_dim(), 2048);
  EXPECT_EQ(c.gdn_value_dim(), 6144);
  EXPECT_EQ(c.gdn_conv_dim(), 10240);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.ngram_heads(), 16);
  EXPECT_EQ(c.ple_head_dim(), 160);
  EXPECT_EQ(c.ple_conv_state_rows(), 9);
  EXPECT_EQ(c.ple_eos(), 248044);
  EXPECT_EQ(c.block_topk(), 512);
}

TEST(ConfigReleased, LayerScheduleAndPle) {
  const ModelConfig c = parse_config(released());
  ASSERT_EQ(c.layer_types.size(), 48u);
  int attention = 0;
  for (int i = 0; i < 48; ++i) {
    const auto expected = (i + 1) % 4 == 0 ? LayerType::kAttention : LayerType::kLinearAttention;
    EXPECT_EQ(c.layer_types[i], expected) << "layer " << i;
    attention += c.layer_types[i] == LayerType::kAttention;
  }
  EXPECT_EQ(attention, 12);
  EXPECT_EQ(c.layer_types[3], LayerType::kAttention);
  EXPECT_EQ(c.ple_index(1), 0);  // ple_layer_ids are 1-indexed: id 2 is layer 1
  EXPECT_EQ(c.ple_index(0), -1);
  EXPECT_EQ(c.ple_index(2), -1);
  EXPECT_EQ(c.ple_index(47), -1);
}

TEST(ConfigReleased, FlatFormMatchesNested) {
  const ModelConfig nested = parse_config(released());
  const ModelConfig flat = parse_config(released_flat());
  EXPECT_EQ(flat.architecture, "Qwen4ExpForCausalLM");
  EXPECT_EQ(flat.layer_types, nested.layer_types);
  EXPECT_EQ(flat.stream_width(), nested.stream_width());
  EXPECT_EQ(flat.block_topk(), nested.block_topk());
  EXPECT_EQ(flat.ple_layer_ids, nested.ple_layer_ids);
  EXPECT_EQ(flat.rotary_dim(), nested.rotary_dim());
  EXPECT_EQ(flat.output_gate_type, nested.output_gate_type);
}

TEST(ConfigDefaults, MinimalFlatConfigUsesHfDefaults) {
  const ModelConfig c = parse_config(json{{"model_type", "qwen4_exp_text"}});
  const ModelConfig d;
  EXPECT_EQ(c.architecture, "");
  EXPECT_EQ(c.hidden_size, d.hidden_size);
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.ple_embed_dim, 2048);  // defaults to hidden_size
  EXPECT_EQ(c.output_gate_type, "silu");  // defaults to hidden_act
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_FALSE(c.has_qsa);
  EXPECT_EQ(c.block_topk(), 0);
  EXPECT_TRUE(c.ple_layer_ids.empty());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.ple_eos(), -1);
  EXPECT_EQ(c.bos_token_id, -1);
  ASSERT_EQ(c.layer_types.size(), 40u);
  EXPECT_EQ(c.layer_types[3], LayerType::kAttention);
  EXPECT_EQ(c.layer_types[4], LayerType::kLinearAttention);
}

TEST(ConfigDefaults, PleEmbedDimAndOutputGateFollowTheirSources) {
  json flat = released_flat();
  flat.erase("ple_embed_dim");
  flat["hidden_size"] = 1024;
  flat["output_gate_type"] = nullptr;
  const ModelConfig c = parse_config(flat);
  EXPECT_EQ(c.ple_embed_dim, 1024);
  EXPECT_EQ(c.output_gate_type, "silu");
  EXPECT_EQ(c.ple_head_dim(), 64);
}

TEST(ConfigLayerTypes, EveryAcceptedName) {
  const std::vector<std::pair<std::string, LayerType>> names = {
      {"linear_attention", LayerType::kLinearAttention}, {"full_attention", LayerType::kAttention},
      {"indexed_attention", LayerType::kAttention},      {"qwen_sparse_attention", LayerType::kAttention},
      {"deepseek_sparse_attention", LayerType::kAttention}, {"hybrid_indexed", LayerType::kAttention},
  };
  json flat = released_flat();
  flat["ple_layer_ids"] = {1};  // layer 0 is linear_attention below
  flat["num_hidden_layers"] = names.size();
  flat["layer_types"] = json::array();
  for (const auto& [name, type] : names) flat["layer_types"].push_back(name);
  const ModelConfig c = parse_config(flat);
  ASSERT_EQ(c.layer_types.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(c.layer_types[i], names[i].second) << names[i].first;
}

TEST(ConfigLayerTypes, UnknownNameListsAcceptedNames) {
  json flat = released_flat();
  flat["layer_types"][5] = "sliding_attention";
  const std::string message = error_of(flat);
  EXPECT_TRUE(names(message, {"layer_types[5]", "sliding_attention", "linear_attention", "full_attention",
                              "indexed_attention", "qwen_sparse_attention", "deepseek_sparse_attention",
                              "hybrid_indexed"}));
}

TEST(ConfigLayerTypes, DerivedFromInterval) {
  json flat = released_flat();
  flat.erase("layer_types");
  flat["full_attention_interval"] = 3;
  flat["num_hidden_layers"] = 7;
  const ModelConfig c = parse_config(flat);
  using enum LayerType;
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{kLinearAttention, kLinearAttention, kAttention, kLinearAttention,
                                                   kLinearAttention, kAttention, kLinearAttention}));
  // Interval absent: default 4; null layer_types counts as absent.
  flat.erase("full_attention_interval");
  flat["layer_types"] = nullptr;
  flat["num_hidden_layers"] = 8;
  const ModelConfig d = parse_config(flat);
  EXPECT_EQ(d.layer_types, (std::vector<LayerType>{kLinearAttention, kLinearAttention, kLinearAttention, kAttention,
                                                   kLinearAttention, kLinearAttention, kLinearAttention, kAttention}));
}

TEST(ConfigLayerTypes, IntervalMustBePositive) {
  json flat = released_flat();
  flat.erase("layer_types");
  flat["full_attention_interval"] = 0;
  EXPECT_TRUE(names(error_of(flat), {"full_attention_interval", "(got 0)"}));
}

TEST(ConfigLayerTypes, LengthMustMatchLayerCount) {
  json flat = released_flat();
  flat["num_hidden_layers"] = 47;
  EXPECT_TRUE(names(error_of(flat), {"layer_types", "num_hidden_layers = 47", "(got 48)"}));
}

TEST(ConfigLayerTypes, NamesAreStable) {
  EXPECT_STREQ(layer_type_name(LayerType::kLinearAttention), "linear_attention");
  EXPECT_STREQ(layer_type_name(LayerType::kAttention), "full_attention");
}

TEST(ConfigModelType, UnknownMissingAndNested) {
  json config = released();
  config["model_type"] = "qwen3_next";
  EXPECT_TRUE(names(error_of(config), {"model_type", "qwen3_next"}));
  config.erase("model_type");
  EXPECT_TRUE(names(error_of(config), {"model_type", "missing"}));
  config = released();
  config.erase("text_config");
  EXPECT_TRUE(names(error_of(config), {"text_config", "missing"}));
  config = released();
  config["text_config"]["model_type"] = "qwen3_5_text";
  EXPECT_TRUE(names(error_of(config), {"text_config.model_type", "qwen3_5_text"}));
  EXPECT_TRUE(names(error_of(json::array()), {"top level", "array"}));
}

TEST(ConfigTypes, WrongTypesNameTheField) {
  EXPECT_EQ(error_with({{"hidden_size", "2560"}}),
            "config.json: field 'text_config.hidden_size' must be an integer, got string");
  json flat = released_flat();
  flat["hidden_size"] = "2560";
  EXPECT_EQ(error_of(flat), "config.json: field 'hidden_size' must be an integer, got string");

  EXPECT_TRUE(names(error_with({{"num_experts", 512.5}}), {"'text_config.num_experts'", "integer", "float"}));
  EXPECT_TRUE(names(error_with({{"num_experts", 512.0}}), {"'text_config.num_experts'", "float"}));
  EXPECT_TRUE(names(error_with({{"head_dim", true}}), {"'text_config.head_dim'", "boolean"}));
  EXPECT_TRUE(names(error_with({{"head_dim", nullptr}}), {"'text_config.head_dim'", "null"}));
  EXPECT_TRUE(names(error_with({{"rms_norm_eps", "1e-6"}}), {"'text_config.rms_norm_eps'", "a number"}));
  EXPECT_TRUE(names(error_with({{"hidden_act", 1}}), {"'text_config.hidden_act'", "a string"}));
  EXPECT_TRUE(names(error_with({{"norm_topk_prob", 1}}), {"'text_config.norm_topk_prob'", "a boolean"}));
  EXPECT_TRUE(names(error_with({{"ple_layer_ids", 2}}), {"'text_config.ple_layer_ids'", "list"}));
  EXPECT_TRUE(names(error_with({{"ple_layer_ids", {2, "3"}}}), {"'text_config.ple_layer_ids[1]'", "string"}));
  EXPECT_TRUE(names(error_with({{"layer_types", "linear_attention"}}), {"'text_config.layer_types'", "list"}));
  EXPECT_TRUE(names(error_with({{"eos_token_id", "248044"}}), {"'text_config.eos_token_id'", "string"}));
  EXPECT_TRUE(names(error_with({{"rope_parameters", 1e7}}), {"'text_config.rope_parameters'", "object"}));
  EXPECT_TRUE(names(error_with({{"indexer_budget", "2048"}}), {"'text_config.indexer_budget'", "string"}));
  EXPECT_TRUE(names(error_with({{"vocab_size", UINT64_MAX}}), {"'text_config.vocab_size'", "out of range"}));
  json config = released();
  config["tie_word_embeddings"] = 0;
  EXPECT_TRUE(names(error_of(config), {"'tie_word_embeddings'", "boolean"}));
  config = released();
  config["architectures"] = "Qwen4ExpForConditionalGeneration";
  EXPECT_TRUE(names(error_of(config), {"'architectures'", "list"}));
}

TEST(ConfigTokens, EosAndBosForms) {
  json flat = released_flat();
  flat["eos_token_id"] = {248044, 248046};
  flat["bos_token_id"] = {7, 8};
  ModelConfig c = parse_config(flat);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{248044, 248046}));
  EXPECT_EQ(c.ple_eos(), 248044);
  EXPECT_EQ(c.bos_token_id, 7);
  flat["ple_layer_ids"] = json::array();  // PLE off: eos may be absent
  flat["eos_token_id"] = nullptr;
  flat.erase("bos_token_id");
  c = parse_config(flat);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.bos_token_id, -1);
}

TEST(ConfigPle, LayerIdsSortedUniqueAndIndexed) {
  json flat = released_flat();
  flat["ple_layer_ids"] = {3, 1, 3, 2, 1};
  const ModelConfig c = parse_config(flat);
  EXPECT_EQ(c.ple_layer_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c.ple_index(0), 0);
  EXPECT_EQ(c.ple_index(1), 1);
  EXPECT_EQ(c.ple_index(2), 2);
  EXPECT_EQ(c.ple_index(3), -1);
}

TEST(ConfigTie, TiedEmbeddingsAllowedAndWrapperWins) {
  json config = released();
  config["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_config(config).tie_word_embeddings);
  config.erase("tie_word_embeddings");
  config["text_config"]["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_config(config).tie_word_embeddings);
  config["tie_word_embeddings"] = false;
  EXPECT_FALSE(parse_config(config).tie_word_embeddings);
}

TEST(ConfigRope, LegacyTopLevelFieldsAndRopeScaling) {
  json flat = released_flat();
  flat.erase("rope_parameters");
  flat["indexer_head_dim"] = 256;  // full rotary (factor 1) must still fit the indexer head
  EXPECT_DOUBLE_EQ(parse_config(flat).rope_theta, 10000.0);  // default theta
  EXPECT_DOUBLE_EQ(parse_config(flat).partial_rotary_factor, 1.0);
  flat["rope_theta"] = 5e6;
  flat["partial_rotary_factor"] = 0.5;
  ModelConfig c = parse_config(flat);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.rotary_dim(), 128);
  flat["rope_scaling"] = {{"type", "default"}, {"rope_theta", 2e6}};
  c = parse_config(flat);
  EXPECT_DOUBLE_EQ(c.rope_theta, 2e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.5);  // top level fills what the dict leaves out
  // rope_parameters wins over rope_scaling and over the top level.
  flat["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}};
  c = parse_config(flat);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rotary_dim(), 64);
}

TEST(ConfigRope, UnsupportedRopeType) {
  json flat = released_flat();
  flat["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_TRUE(names(error_of(flat), {"rope_parameters.rope_type", "unsupported rope_type", "yarn"}));
  flat.erase("rope_parameters");
  flat["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_TRUE(names(error_of(flat), {"rope_scaling.rope_type", "linear"}));
}

TEST(ConfigRope, PerLayerTypeParametersRejected) {
  json flat = released_flat();
  flat["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e7}}}};
  EXPECT_TRUE(names(error_of(flat), {"rope_parameters.full_attention", "per-layer-type"}));
}

TEST(ConfigRope, ThetaMustBePositive) {
  json flat = released_flat();
  flat["rope_parameters"]["rope_theta"] = 0;
  EXPECT_TRUE(names(error_of(flat), {"rope_theta", "> 0", "(got 0)"}));
}

TEST(ConfigRope, RotaryDimMustBeEvenPositiveAndFitHeadDim) {
  json flat = released_flat();
  flat["rope_parameters"]["partial_rotary_factor"] = 0.2;  // int(256 * 0.2) = 51
  EXPECT_TRUE(names(error_of(flat), {"partial_rotary_factor", "even", "(got 51)"}));
  flat["rope_parameters"]["partial_rotary_factor"] = 0.001;  // int(0.256) = 0
  EXPECT_TRUE(names(error_of(flat), {"partial_rotary_factor", "> 0", "(got 0)"}));
  flat["rope_parameters"]["partial_rotary_factor"] = 1.5;
  EXPECT_TRUE(names(error_of(flat), {"partial_rotary_factor", "(0, 1]", "(got 1.5)"}));
  flat["rope_parameters"]["partial_rotary_factor"] = -0.25;
  EXPECT_TRUE(names(error_of(flat), {"partial_rotary_factor", "(got -0.25)"}));
}

TEST(ConfigValidate, SizesMustBePositive) {
  for (const char* field :
       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "max_position_embeddings", "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "num_experts", "moe_intermediate_size",
        "shared_expert_intermediate_size", "hc_lowrank"}) {
    for (const int64_t bad : {0, -1}) {
      SCOPED_TRACE(std::string(field) + " = " + std::to_string(bad));
      EXPECT_TRUE(names(error_with({{field, bad}}), {std::string("text_config.") + field + ":",
                                                      "(got " + std::to_string(bad) + ")"}));
    }
  }
}

TEST(ConfigValidate, SizesMustBePlausible) {
  EXPECT_TRUE(names(error_with({{"hidden_size", int64_t{1} << 40}}), {"hidden_size", "2^31", "(got 1099511627776)"}));
}

TEST(ConfigValidate, RmsNormEpsMustBeNonNegative) {
  EXPECT_TRUE(names(error_with({{"rms_norm_eps", -1e-6}}), {"rms_norm_eps", ">= 0"}));
}

TEST(ConfigValidate, HiddenActMustBeSilu) {
  EXPECT_TRUE(names(error_with({{"hidden_act", "gelu"}}), {"hidden_act", "silu", "(got \"gelu\")"}));
}

TEST(ConfigValidate, AttentionBiasIsRejected) {
  EXPECT_TRUE(names(error_with({{"attention_bias", true}}), {"attention_bias", "not supported"}));
}

TEST(ConfigValidate, OutputGateTypeMustBeSigmoidOrSilu) {
  EXPECT_TRUE(names(error_with({{"output_gate_type", "tanh"}}), {"output_gate_type", "sigmoid", "(got \"tanh\")"}));
  EXPECT_EQ(parse_config(released()).output_gate_type, "sigmoid");
  json config = released();
  config["text_config"]["output_gate_type"] = "silu";
  EXPECT_EQ(parse_config(config).output_gate_type, "silu");
}

TEST(ConfigValidate, HcCountMustExceedOne) {
  EXPECT_TRUE(names(error_with({{"hc_count", 1}}), {"hc_count", ">= 2", "(got 1)"}));
  json config = released();
  config["text_config"]["hc_count"] = 2;
  EXPECT_EQ(parse_config(config).stream_width(), 5120);
}

TEST(ConfigValidate, ExpertsPerTokenInRange) {
  EXPECT_TRUE(names(error_with({{"num_experts_per_tok", 0}}), {"num_experts_per_tok", "num_experts = 512", "(got 0)"}));
  EXPECT_TRUE(names(error_with({{"num_experts_per_tok", 513}}), {"num_experts_per_tok", "(got 513)"}));
  json config = released();
  config["text_config"]["num_experts_per_tok"] = 512;
  EXPECT_EQ(parse_config(config).num_experts_per_tok, 512);
}

TEST(ConfigValidate, KvHeadsMustDivideHeads) {
  EXPECT_TRUE(names(error_with({{"num_key_value_heads", 5}}),
                    {"num_key_value_heads", "num_attention_heads = 24", "(got 5)"}));
}

TEST(ConfigValidate, LinearKeyHeadsMustDivideValueHeads) {
  EXPECT_TRUE(names(error_with({{"linear_num_key_heads", 32}}),
                    {"linear_num_key_heads", "linear_num_value_heads = 48", "(got 32)"}));
}

TEST(ConfigQsa, AllAbsentDisablesIt) {
  json flat = released_flat();
  for (const char* key : {"indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget"}) {
    flat.erase(key);
  }
  flat["indexer_compress_ratio"] = nullptr;  // null counts as absent
  const ModelConfig c = parse_config(flat);
  EXPECT_FALSE(c.has_qsa);
  EXPECT_EQ(c.block_topk(), 0);
}

TEST(ConfigQsa, PartialFieldsListTheMissingOnes) {
  json flat = released_flat();
  flat.erase("indexer_budget");
  flat["indexer_compress_ratio"] = nullptr;
  EXPECT_TRUE(names(error_of(flat), {"indexer_budget:", "all set or all absent", "indexer_compress_ratio"}));
}

TEST(ConfigQsa, ValuesMustBePositive) {
  for (const char* field :
       {"indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio"}) {
    SCOPED_TRACE(field);
    EXPECT_TRUE(names(error_with({{field, 0}}), {std::string("text_config.") + field + ":", "(got 0)"}));
  }
}

TEST(ConfigQsa, OneKeyHead) {
  EXPECT_TRUE(names(error_with({{"indexer_kv_heads", 2}}), {"indexer_kv_heads", "one", "(got 2)"}));
}

TEST(ConfigQsa, BudgetDivisibleByCompressRatio) {
  EXPECT_TRUE(names(error_with({{"indexer_budget", 2050}}),
                    {"indexer_budget", "indexer_compress_ratio = 4", "(got 2050)"}));
}

TEST(ConfigQsa, RotaryDimFitsIndexerHead) {
  EXPECT_TRUE(names(error_with({{"indexer_head_dim", 32}}), {"indexer_head_dim", "rotary_dim = 64", "(got 32)"}));
  json config = released();
  config["text_config"]["indexer_head_dim"] = 64;  // equal is fine
  EXPECT_EQ(parse_config(config).indexer_head_dim, 64);
}

TEST(ConfigPle, NgramSizeAtLeastTwo) {
  EXPECT_TRUE(names(error_with({{"ngram_size", 1}}), {"ngram_size", ">= 2", "(got 1)"}));
}

TEST(ConfigPle, HeadsPerNgramAtLeastOne) {
  EXPECT_TRUE(names(error_with({{"heads_per_ngram", 0}}), {"heads_per_ngram", "(got 0)"}));
}

TEST(ConfigPle, EmbedDimDivisibleByNgramHeads) {
  EXPECT_TRUE(names(error_with({{"heads_per_ngram", 12}}), {"ple_embed_dim", "= 24", "(got 2560)"}));
  EXPECT_TRUE(names(error_with({{"ple_embed_dim", 0}}), {"ple_embed_dim", "(got 0)"}));
}

TEST(ConfigPle, LayerIdsInRange) {
  EXPECT_TRUE(names(error_with({{"ple_layer_ids", {0, 2}}}), {"ple_layer_ids", "1-indexed", "(got [0, 2])"}));
  EXPECT_TRUE(names(error_with({{"ple_layer_ids", {49}}}), {"ple_layer_ids", "num_hidden_layers = 48", "(got [49])"}));
}

TEST(ConfigPle, OnlyOnLinearAttentionLayers) {
  EXPECT_TRUE(names(error_with({{"ple_layer_ids", {2, 4}}}),
                    {"ple_layer_ids", "linear_attention", "id 4 (layer 3)", "(got [2, 4])"}));
}

TEST(ConfigPle, EosRequired) {
  EXPECT_TRUE(names(error_with({{"eos_token_id", nullptr}}), {"eos_token_id", "PLE"}));
  EXPECT_TRUE(names(error_with({{"eos_token_id", json::array()}}), {"eos_token_id", "PLE"}));
}

TEST(ConfigPle, VocabSizingFields) {
  EXPECT_TRUE(names(error_with({{"ngram_vocab_size_base", 1}}), {"ngram_vocab_size_base", ">= 2", "(got 1)"}));
  EXPECT_TRUE(names(error_with({{"make_ngram_vocab_size_divisible_by", 0}}),
                    {"make_ngram_vocab_size_divisible_by", "(got 0)"}));
  EXPECT_TRUE(names(error_with({{"ple_conv_kernel_size", 0}}), {"ple_conv_kernel_size", "(got 0)"}));
  EXPECT_TRUE(names(error_with({{"split_ngram_parts", 0}}), {"split_ngram_parts", "(got 0)"}));
}

TEST(ConfigPle, FieldsIgnoredWithoutPle) {
  json config = released();
  config["text_config"]["ple_layer_ids"] = nullptr;
  config["text_config"]["ngram_size"] = 1;
  config["text_config"]["eos_token_id"] = nullptr;
  const ModelConfig c = parse_config(config);
  EXPECT_TRUE(c.ple_layer_ids.empty());
  EXPECT_EQ(c.ple_index(1), -1);
}

// load_config: one scratch folder per test.
class ConfigLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("imp_config_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "config.json") << text; }
  std::string load_error() {
    try {
      load_config(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_config succeeded";
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigLoad, ReadsTheReleasedConfig) {
  write(kReleasedConfig);
  EXPECT_EQ(load_config(dir_).block_topk(), 512);
}

TEST_F(ConfigLoad, MissingFileNamesThePath) {
  const std::string message = load_error();
  EXPECT_NE(message.find((dir_ / "config.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("not found"), std::string::npos) << message;
}

TEST_F(ConfigLoad, InvalidJsonNamesThePathAndParserMessage) {
  write("{\"model_type\": \"qwen4_exp_text\",\n  \"hidden_size\": }");
  const std::string message = load_error();
  EXPECT_EQ(message.rfind((dir_ / "config.json").string() + ": invalid JSON: ", 0), 0u) << message;
  EXPECT_NE(message.find("parse error"), std::string::npos) << message;
}

TEST_F(ConfigLoad, ValidationErrorsGetThePath) {
  json config = released();
  config["text_config"]["hidden_size"] = "2560";
  write(config.dump());
  EXPECT_EQ(load_error(), (dir_ / "config.json").string() +
                              ": field 'text_config.hidden_size' must be an integer, got string");
}

}  // namespace
}  // namespace imp::model
