// Tokenizer encode throughput: the King James Bible (Debian bible-kjv, 4.4 MB of English prose) encoded
// in one call on one thread, several times; writes the runs and their median as JSON.
//
//   build/tok/bin/imp_tokenizer_bench [--model DIR] [--text FILE] [--runs N] [--out FILE]
//
// The first run starts with an empty BPE cache (reported separately); the median is over all runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return trim(line.substr(line.find(':') + 2));
  }
  return "unknown";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) imp::fail("cannot read {}", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int run(int argc, char** argv) {
  fs::path model = fs::path(IMP_SOURCE_DIR) / ".." / "shared" / "data" / "qwen3-tokenizer";
  fs::path text_file;
  fs::path out = fs::path(IMP_SOURCE_DIR) / "bench" / "results" / "tokenizer_encode.json";
  int runs = 7;
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    command += " " + arg;
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) imp::fail("{} needs a value", arg);
      command += std::string(" ") + argv[i + 1];
      return argv[++i];
    };
    if (arg == "--model") {
      model = value();
    } else if (arg == "--text") {
      text_file = value();
    } else if (arg == "--runs") {
      runs = std::stoi(value());
    } else if (arg == "--out") {
      out = value();
    } else {
      imp::fail("unknown option {} (--model DIR, --text FILE, --runs N, --out FILE)", arg);
    }
  }
  if (runs < 5) imp::fail("--runs must be at least 5");

  std::string text, text_name;
  if (text_file.empty()) {
    text = run_command("bible -f Genesis1:1-Revelation22:21 </dev/null 2>/dev/null");
    text_name = "King James Bible (bible-kjv: bible -f Genesis1:1-Revelation22:21)";
    if (text.size() < 4'000'000) imp::fail("`bible` (Debian bible-kjv) is missing or printed too little; pass --text FILE");
  } else {
    text = read_file(text_file);
    text_name = text_file.filename().string();
  }

  const auto load_start = std::chrono::steady_clock::now();
  const imp::text::Tokenizer tokenizer = imp::text::Tokenizer::load(model);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  std::vector<double> mb_per_s;
  size_t tokens = 0;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tokens = ids.size();
    mb_per_s.push_back(static_cast<double>(text.size()) / seconds / 1e6);
    fmt::print("run {}: {:.2f} MB/s ({} tokens)\n", r + 1, mb_per_s.back(), tokens);
  }
  std::vector<double> sorted = mb_per_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];

  const std::string source = fs::path(IMP_SOURCE_DIR).string();
  std::string commit = trim(run_command(fmt::format("git -C '{}' rev-parse HEAD 2>/dev/null", source)));
  if (!trim(run_command(fmt::format("git -C '{}' status --porcelain -- src/text 2>/dev/null", source))).empty()) {
    commit += " (src/text modified)";
  }
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));

  const nlohmann::json result = {
      {"date", date},
      {"machine", fmt::format("{} ({} hardware threads)", cpu_model(), std::thread::hardware_concurrency())},
      {"commit", commit},
      {"command", command},
      {"note", "single-threaded Tokenizer::encode of the whole text in one call; first run starts with an empty BPE cache"},
      {"results",
       {{"tokenizer", fs::absolute(model).lexically_normal().string()},
        {"text", text_name},
        {"bytes", text.size()},
        {"tokens", tokens},
        {"load_s", load_s},
        {"runs_mb_per_s", mb_per_s},
        {"first_run_mb_per_s", mb_per_s.front()},
        {"median_mb_per_s", median}}},
  };
  fs::create_directories(out.parent_path());
  std::ofstream(out) << result.dump(2) << "\n";
  fmt::print("median {:.2f} MB/s over {} runs (load {:.2f} s); wrote {}\n", median, runs, load_s, out.string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "imp_tokenizer_bench: %s\n", e.what());
    return 1;
  }
}
