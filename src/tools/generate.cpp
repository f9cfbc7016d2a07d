// imp generate: prefill a prompt (token ids, or text through the model's tokenizer), then decode greedily
// (or sampled), streaming the tokens or the text, optionally writing the logits of every position.
// Output contracts (--json line, --logits-out layout) are relied on by other tools; keep them stable.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/stop_tokens.h"
#include "text/tokenizer.h"
#include "tools/commands.h"
#include "tools/engine_options.h"
#include "tools/sampling_options.h"
#include "tools/token_list.h"

namespace imp::tools {
namespace {

struct GenerateOptions {
  std::string model_dir;
  runtime::EngineOptions engine;
  std::string prompt_tokens;
  std::string prompt_text;
  int64_t max_tokens = 16;
  bool json = false;
  bool ignore_eos = false;
  std::string logits_out;
  runtime::SamplingOptions sampling;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class LogitsWriter {
 public:
  explicit LogitsWriter(const std::string& path) {
    if (path.empty()) return;
    file_.open(path, std::ios::binary | std::ios::trunc);
    if (!file_) fail("--logits-out: cannot open '{}' for writing", path);
    path_ = path;
  }
  bool enabled() const { return file_.is_open(); }
  void write(const float* data, size_t count) {
    file_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
    if (!file_) fail("--logits-out: writing '{}' failed (disk full?)", path_);
  }

 private:
  std::ofstream file_;
  std::string path_;
};

int run_generate(const GenerateOptions& options) {
  if (options.max_tokens < 1) fail("--max-tokens must be at least 1");
  // Text mode: the model folder's tokenizer encodes the prompt and decodes what is generated.
  std::optional<text::Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  if (!options.prompt_text.empty()) {
    tokenizer = text::Tokenizer::load(options.model_dir);
    prompt = tokenizer->encode(options.prompt_text);
    if (prompt.empty()) fail("--prompt encodes to no tokens");
  } else if (!options.prompt_tokens.empty()) {
    prompt = parse_token_ids(options.prompt_tokens, "--prompt-tokens");
  } else {
    fail("give the prompt with --prompt TEXT or --prompt-tokens IDS");
  }

  const auto load_start = std::chrono::steady_clock::now();
  auto engine = runtime::load_engine(options.model_dir, options.engine);
  const double load_s = seconds_since(load_start);
  const model::ModelConfig& config = engine->config();
  const int64_t vocab = config.vocab_size;
  log::info("loaded {} ({} layers, {} experts, backend {}) in {:.2f} s", options.model_dir, config.num_hidden_layers,
            config.num_experts, engine->backend_name(), load_s);

  if (tokenizer && tokenizer->vocab_size() > vocab) {
    fail("the tokenizer has {} tokens but the model's vocab_size is {}", tokenizer->vocab_size(), vocab);
  }
  const std::vector<int32_t> stops = runtime::load_stop_tokens(options.model_dir, config);
  LogitsWriter logits_out(options.logits_out);
  runtime::Sampler sampler(options.sampling);
  const runtime::SequenceId sequence = engine->new_sequence();

  // The engine chooses each token (on the device for GPU backends: 4 bytes back instead of a logits row) with the
  // sampler's next draw, unless --logits-out needs the rows: then the host samples them, the same tokens.
  const bool engine_samples = !logits_out.enabled();
  auto forward = [&](std::span<const int32_t> tokens, bool all_logits) -> int32_t {
    runtime::ForwardRequest request{.sequence = sequence, .tokens = tokens, .all_logits = all_logits};
    if (engine_samples) request.sampling = runtime::TokenSampling{.options = options.sampling, .draw = sampler.take_draw()};
    runtime::ForwardResult result = std::move(engine->forward_sampled({&request, 1}).front());
    if (engine_samples) return result.token;
    logits_out.write(result.logits.data(), result.logits.size());
    return sampler.sample(std::span<const float>(result.logits).last(static_cast<size_t>(vocab)));
  };

  // Prefill: all rows only when they are written out.
  const auto prefill_start = std::chrono::steady_clock::now();
  int32_t token = forward(prompt, logits_out.enabled());
  const double prefill_s = seconds_since(prefill_start);

  std::vector<int32_t> generated;
  std::optional<text::IncrementalDetokenizer> detokenizer;
  if (tokenizer) detokenizer.emplace(*tokenizer);
  std::string text;
  const auto decode_start = std::chrono::steady_clock::now();
  while (true) {
    generated.push_back(token);
    const bool is_stop = std::find(stops.begin(), stops.end(), token) != stops.end();
    const bool done = static_cast<int64_t>(generated.size()) >= options.max_tokens || (is_stop && !options.ignore_eos);
    if (detokenizer) {
      std::string piece = detokenizer->push(token);
      if (done) piece += detokenizer->finish();
      text += piece;
      if (!options.json) fmt::print("{}", piece);
    } else if (!options.json) {
      fmt::print("{}{}", generated.size() == 1 ? "" : " ", token);
    }
    if (!options.json) std::fflush(stdout);
    if (done) break;
    const int32_t next[1] = {token};
    token = forward(next, false);
  }
  const double decode_s = seconds_since(decode_start);
  engine->release(sequence);

  const double decode_steps = static_cast<double>(generated.size() - 1);
  nlohmann::json timings = {
      {"load_s", load_s},
      {"prefill_s", prefill_s},
      {"prefill_tokens_per_s", static_cast<double>(prompt.size()) / prefill_s},
      {"decode_s", decode_s},
      {"decode_tokens_per_s", decode_steps > 0 ? decode_steps / decode_s : 0.0},
  };
  if (options.json) {
    nlohmann::json out = {{"prompt_tokens", prompt}, {"tokens", generated}, {"timings", timings}};
    if (tokenizer) out["text"] = text;
    fmt::print("{}\n", out.dump());
  } else {
    fmt::print("\n");
    std::fflush(stdout);
    log::info("prefill {} tokens in {:.3f} s, decode {} tokens in {:.3f} s", prompt.size(), prefill_s,
              generated.size(), decode_s);
  }
  return 0;
}

void add_generate(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens from a prompt of token ids");
  cmd->add_option("--model", options->model_dir, "Model folder (config.json + safetensors)")->required();
  add_engine_options(*cmd, options->engine);
  auto* tokens_opt = cmd->add_option("--prompt-tokens", options->prompt_tokens, "Prompt token ids, comma-separated");
  auto* text_opt = cmd->add_option("--prompt", options->prompt_text, "Prompt text (needs the model's tokenizer.json)");
  tokens_opt->excludes(text_opt);
  cmd->add_option("--max-tokens", options->max_tokens, "Tokens to generate")->capture_default_str();
  cmd->add_flag("--json", options->json, "Print one JSON line: prompt_tokens, tokens, timings");
  cmd->add_option("--logits-out", options->logits_out,
                  "Write float32 logits rows: one per prompt position, then one per generated token except the last");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Do not stop at an end-of-sequence token");
  add_sampling_options(*cmd, options->sampling);
  cmd->callback([&run, options] { run = [options] { return run_generate(*options); }; });
}

const Registration kRegistration(add_generate);

}  // namespace
}  // namespace imp::tools
