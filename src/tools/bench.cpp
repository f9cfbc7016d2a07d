// imp bench: prompt processing (pp) and decode (tg) throughput of a model or of dummy weights at any shape,
// medians of several runs after a warm-up, as one JSON document (machine, commit, command, per-phase times)
// plus, on a GPU backend, the roofline line: bytes read per decode token / decode time against the device
// read bandwidth measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "tools/commands.h"
#include "tools/engine_options.h"
#include "tools/token_list.h"

namespace imp::tools {
namespace {

namespace fs = std::filesystem;

struct BenchOptions {
  std::string model_dir;
  std::string dummy_config;
  runtime::EngineOptions engine;
  std::string pp = "512,4096,16384";
  std::string tg = "128,512";
  std::string contexts = "1024,32768";
  int runs = 5;
  std::string out;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string command_line() {
  std::string cmd = read_text("/proc/self/cmdline");
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return cmd;
}

// IMP_COMMIT (set by scripts that run on a machine without the repository's .git), else git, else unknown.
std::string commit() {
  if (const char* env = std::getenv("IMP_COMMIT")) return env;
  FILE* pipe = popen("git rev-parse HEAD 2>/dev/null", "r");
  std::string out;
  if (pipe) {
    char buffer[128];
    while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string host_cpu() {
  const std::string info = read_text("/proc/cpuinfo");
  const size_t at = info.find("model name");
  if (at == std::string::npos) return "unknown";
  const size_t colon = info.find(':', at), end = info.find('\n', at);
  return info.substr(colon + 2, end - colon - 2);
}

std::vector<int32_t> random_tokens(int64_t count, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

double seconds_of(const auto& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prefill of `tokens` random tokens into a fresh sequence (last row's logits only).
double time_prefill(runtime::Engine& engine, int64_t tokens, uint32_t seed) {
  const std::vector<int32_t> prompt = random_tokens(tokens, engine.config().vocab_size, seed);
  const runtime::SequenceId sequence = engine.new_sequence();
  const runtime::ForwardRequest request{sequence, prompt, false};
  const double s = seconds_of([&] { engine.forward({&request, 1}); });
  engine.release(sequence);
  return s;
}

// Greedy decode of `tokens` tokens at `context` tokens of context; seconds.
double time_decode(runtime::Engine& engine, int64_t context, int32_t tokens, uint32_t seed) {
  const runtime::SequenceId sequence = engine.new_sequence();
  double s = 0.0;
  if (runtime::DeviceBenchmark* device = engine.device_benchmark()) {
    device->fill_context(sequence, context);
    s = device->decode_greedy_on_device(sequence, 0, tokens) * 1e-3;
  } else {
    const std::vector<int32_t> prompt = random_tokens(context, engine.config().vocab_size, seed);
    const runtime::ForwardRequest request{sequence, prompt, false};
    std::vector<float> logits = engine.forward({&request, 1}).front();
    s = seconds_of([&] {
      for (int32_t i = 0; i < tokens; ++i) {
        const int32_t next = runtime::argmax(logits);
        const runtime::ForwardRequest step{sequence, {&next, 1}, false};
        logits = engine.forward({&step, 1}).front();
      }
    });
  }
  engine.release(sequence);
  return s;
}

int run_bench(BenchOptions options) {
  if (options.runs < 1) fail("--runs must be at least 1");
  fs::path model_dir = options.model_dir;
  if (!options.dummy_config.empty()) {
    // load_config reads DIR/config.json: give the dummy config a folder of its own.
    if (!fs::exists(options.dummy_config)) fail("--dummy: '{}' does not exist", options.dummy_config);
    model_dir = fs::temp_directory_path() / fmt::format("imp_bench_dummy_{}", getpid());
    fs::create_directories(model_dir);
    fs::copy_file(options.dummy_config, model_dir / "config.json", fs::copy_options::overwrite_existing);
    options.engine.load_format = "dummy";
  }
  if (model_dir.empty()) fail("give --model DIR or --dummy CONFIG.json");
  const std::vector<int32_t> pp = parse_token_ids(options.pp, "--pp");
  const std::vector<int32_t> tg = parse_token_ids(options.tg, "--tg");
  const std::vector<int32_t> contexts = parse_token_ids(options.contexts, "--context");

  if (options.engine.max_context == 0) {  // room for the longest prompt and the longest decode run
    const int64_t longest_pp = pp.empty() ? 0 : *std::max_element(pp.begin(), pp.end());
    const int64_t longest_tg = (contexts.empty() ? 0 : *std::max_element(contexts.begin(), contexts.end())) +
                               (tg.empty() ? 0 : *std::max_element(tg.begin(), tg.end())) + 1;
    options.engine.max_context = std::max(longest_pp, longest_tg);
    log::info("bench: context {} tokens (the longest prompt, or the longest context plus decode run)", options.engine.max_context);
  }
  std::unique_ptr<runtime::Engine> engine;
  const double loaded_s = seconds_of([&] { engine = runtime::load_engine(model_dir, options.engine); });
  if (!options.dummy_config.empty()) fs::remove_all(model_dir);
  const model::ModelConfig& c = engine->config();
  runtime::DeviceBenchmark* device = engine->device_benchmark();

  nlohmann::json result;
  result["machine"] = {{"device", device ? device->device_name() : "cpu"}, {"host_cpu", host_cpu()}};
  result["commit"] = commit();
  result["command"] = command_line();
  result["model"] = {{"source", options.dummy_config.empty() ? options.model_dir : "dummy:" + options.dummy_config},
                     {"layers", c.num_hidden_layers}, {"hidden", c.hidden_size}, {"experts", c.num_experts},
                     {"experts_per_token", c.num_experts_per_tok}, {"vocab", c.vocab_size}};
  result["backend"] = engine->backend_name();
  result["load_s"] = loaded_s;
  result["runs"] = options.runs;

  // Prefill: one warm-up, then the timed runs.
  nlohmann::json prefill = nlohmann::json::array();
  for (int32_t tokens : pp) {
    time_prefill(*engine, tokens, 1);
    std::vector<double> runs;
    for (int r = 0; r < options.runs; ++r) runs.push_back(time_prefill(*engine, tokens, 2 + static_cast<uint32_t>(r)));
    const double s = median(runs);
    prefill.push_back({{"tokens", tokens}, {"median_s", s}, {"tokens_per_s", tokens / s}, {"runs_s", runs}});
    log::info("pp {:>6}: {:9.1f} tok/s (median {:.3f} s of {})", tokens, tokens / s, s, options.runs);
  }
  result["prefill"] = prefill;

  nlohmann::json decode = nlohmann::json::array();
  for (int32_t context : contexts) {
    for (int32_t tokens : tg) {
      time_decode(*engine, context, tokens, 1);
      std::vector<double> rates;
      for (int r = 0; r < options.runs; ++r) rates.push_back(tokens / time_decode(*engine, context, tokens, 2 + static_cast<uint32_t>(r)));
      const double rate = median(rates);
      decode.push_back({{"context", context}, {"tokens", tokens}, {"tokens_per_s", rate}, {"ms_per_token", 1e3 / rate},
                        {"runs_tokens_per_s", rates}});
      log::info("tg {:>4} at context {:>6}: {:8.1f} tok/s ({:.3f} ms/token, median of {})", tokens, context, rate,
                1e3 / rate, options.runs);
    }
  }
  result["decode"] = decode;

  if (device && !decode.empty()) {
    const double bandwidth = device->measure_read_bandwidth();
    const double bytes = static_cast<double>(device->decode_bytes_per_token());
    const nlohmann::json& first = decode.front();  // the shortest context listed first
    const double rate = first["tokens_per_s"].get<double>();
    const double achieved = bytes * rate;
    result["roofline"] = {{"bytes_per_token", bytes}, {"read_bandwidth_bytes_per_s", bandwidth},
                          {"floor_tokens_per_s", bandwidth / bytes}, {"decode_context", first["context"]},
                          {"decode_tokens_per_s", rate}, {"achieved_bytes_per_s", achieved},
                          {"fraction_of_bandwidth", achieved / bandwidth}};
    log::info("roofline: {:.2f} GB/token x {:.1f} tok/s = {:.2f} TB/s = {:.0f}% of the measured {:.2f} TB/s read "
              "(floor {:.0f} tok/s; {:.2f}x from it)",
              bytes / 1e9, rate, achieved / 1e12, 100.0 * achieved / bandwidth, bandwidth / 1e12, bandwidth / bytes,
              (bandwidth / bytes) / rate);
  }

  const std::string text = result.dump(2);
  if (!options.out.empty()) {
    std::ofstream out(options.out);
    out << text << "\n";
    if (!out) fail("--out: cannot write '{}'", options.out);
  }
  fmt::print("{}\n", text);
  return 0;
}

void add_bench(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Prefill and decode throughput (JSON), with the roofline on a GPU");
  auto* model = cmd->add_option("--model", options->model_dir, "Model folder (config.json + safetensors)");
  auto* dummy = cmd->add_option("--dummy", options->dummy_config, "A config.json: random weights of its shapes (GPU)");
  model->excludes(dummy);
  add_engine_options(*cmd, options->engine);
  cmd->add_option("--pp", options->pp, "Prompt lengths to prefill, comma-separated")->capture_default_str();
  cmd->add_option("--tg", options->tg, "Decode lengths, comma-separated")->capture_default_str();
  cmd->add_option("--context", options->contexts, "Context lengths to decode at, comma-separated")->capture_default_str();
  cmd->add_option("--runs", options->runs, "Timed runs per measurement (after one warm-up); medians are reported")
      ->capture_default_str();
  cmd->add_option("--out", options->out, "Also write the JSON to this file");
  cmd->callback([&run, options] { run = [options] { return run_bench(*options); }; });
}

const Registration kRegistration(add_bench);

}  // namespace
}  // namespace imp::tools
