// imp inspect: config summary, a compact tensor inventory (layer, expert and shard numbers folded) and
// bytes by dtype and by role. Its output is read by people and scripts; keep it stable.
#include <map>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#include "tools/commands.h"

namespace imp::tools {
namespace {

std::string role_of(const std::string& name) {
  if (name.starts_with("embed_tokens")) return "embedding";
  if (name.starts_with("lm_head")) return "lm_head";
  if (name.find("hyper_connection") != std::string::npos) return "hyper_connection";
  if (name.find(".mlp.experts.") != std::string::npos) return "routed_experts";
  if (name.find(".mlp.shared_expert") != std::string::npos) return "shared_expert";
  if (name.find(".mlp.gate.") != std::string::npos) return "router";
  if (name.find(".ngram_embedding.") != std::string::npos) return "ple_table";
  if (name.find(".ple.") != std::string::npos) return "ple";
  if (name.find(".linear_attn.") != std::string::npos) return "gated_deltanet";
  if (name.find(".indexer.") != std::string::npos) return "qsa_indexer";
  if (name.find(".self_attn.") != std::string::npos) return "attention";
  return "other";
}

std::string gib(uint64_t bytes) { return fmt::format("{:.3f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

int run_inspect(const std::string& model_dir) {
  const model::ModelConfig c = model::load_config(model_dir);
  const model::Checkpoint checkpoint = model::Checkpoint::open(model_dir);
  const model::ModelWeights weights = model::bind_weights(c, checkpoint);

  int attention_layers = 0;
  for (auto type : c.layer_types) attention_layers += type == model::LayerType::kAttention;
  fmt::print("model: {}\n", model_dir);
  fmt::print("architecture: {}\n", c.architecture.empty() ? "(none)" : c.architecture);
  fmt::print("layers: {} ({} gated deltanet, {} attention{})\n", c.num_hidden_layers,
             c.num_hidden_layers - attention_layers, attention_layers, c.has_qsa ? " + QSA indexer" : "");
  fmt::print("hidden: {}  streams: {} x {} (lowrank {})  vocab: {}\n", c.hidden_size, c.hc_count, c.hidden_size,
             c.hc_lowrank, c.vocab_size);
  fmt::print("attention: {} heads / {} kv heads x {}, rotary {} (theta {})\n", c.num_attention_heads,
             c.num_key_value_heads, c.head_dim, c.rotary_dim(), c.rope_theta);
  if (c.has_qsa) {
    fmt::print("qsa: {} heads x {}, budget {} tokens in blocks of {} (top {} blocks)\n", c.indexer_n_heads,
               c.indexer_head_dim, c.indexer_budget, c.indexer_compress_ratio, c.block_topk());
  }
  fmt::print("gated deltanet: {} key heads / {} value heads x {}/{}, conv {}, output gate {}\n", c.linear_num_key_heads,
             c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim, c.linear_conv_kernel_dim,
             c.output_gate_type);
  fmt::print("moe: {} experts, top {}{}, intermediate {}, shared {}, experts {}\n", c.num_experts, c.num_experts_per_tok,
             c.norm_topk_prob ? " (renormalised)" : "", c.moe_intermediate_size, c.shared_expert_intermediate_size,
             weights.experts_nvfp4 ? "NVFP4" : "dense");
  if (!c.ple_layer_ids.empty()) {
    fmt::print("ple: layers {} (1-indexed), {}-grams x {} heads of {}, seed {}\n", fmt::join(c.ple_layer_ids, ","),
               c.ngram_size, c.ngram_heads(), c.ple_head_dim(), c.seed);
  }
  fmt::print("eos: {}\n", fmt::join(c.eos_token_ids, ","));

  // Inventory with layer, expert and shard numbers folded into '*'.
  static const std::regex numbers(R"((layers|experts)\.\d+|shard_\d+)");
  struct Entry {
    size_t count = 0;
    uint64_t bytes = 0;
    std::string dtype, shape;
  };
  std::map<std::string, Entry> inventory;
  std::map<std::string, uint64_t> by_dtype, by_role;
  uint64_t total = 0;
  for (const model::TensorInfo& t : checkpoint.tensors()) {
    const std::string pattern = std::regex_replace(t.name, numbers, "$1*");
    Entry& e = inventory[fmt::format("{} {}", pattern, dtype_name(t.dtype))];
    ++e.count;
    e.bytes += t.nbytes;
    e.dtype = std::string(dtype_name(t.dtype));
    e.shape = t.shape_string();
    by_dtype[e.dtype] += t.nbytes;
    by_role[role_of(t.name)] += t.nbytes;
    total += t.nbytes;
  }
  fmt::print("\ntensors: {} ({} set aside: mtp / vision)\n", checkpoint.tensors().size(), checkpoint.set_aside_count());
  for (const auto& [key, e] : inventory) {
    fmt::print("  {:<72} x{:<6} {:<8} {:<16} {}\n", key.substr(0, key.rfind(' ')), e.count, e.dtype, e.shape, gib(e.bytes));
  }
  fmt::print("\nbytes by dtype:\n");
  for (const auto& [dtype, bytes] : by_dtype) fmt::print("  {:<10} {}\n", dtype, gib(bytes));
  fmt::print("bytes by role:\n");
  for (const auto& [role, bytes] : by_role) fmt::print("  {:<18} {}\n", role, gib(bytes));
  fmt::print("total: {} ({} bytes)\n", gib(total), total);
  return 0;
}

void add_inspect(CLI::App& app, std::function<int()>& run) {
  auto model_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model folder's config, tensors and bytes by dtype and role");
  cmd->add_option("--model", *model_dir, "Model folder")->required();
  cmd->callback([&run, model_dir] { run = [model_dir] { return run_inspect(*model_dir); }; });
}

const Registration kRegistration(add_inspect);

}  // namespace
}  // namespace imp::tools
