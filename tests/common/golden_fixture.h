// A golden fixture (tests/fixtures/golden/*, tests/fixtures/chat_tiny; made by scripts/make_golden.py and
// scripts/make_chat_fixture.py from Hugging Face transformers) as the CPU and CUDA golden tests read it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace imp::testing_support {

struct GoldenFixture {
  std::filesystem::path dir;
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  std::vector<float> reference;  // rows of vocab: every prompt position, then every greedy token but the last
  int64_t vocab = 0;

  explicit GoldenFixture(const std::filesystem::path& fixture_dir) : dir(fixture_dir) {
    std::ifstream in(dir / "golden.json");
    const nlohmann::json golden = nlohmann::json::parse(in);
    prompt = golden.at("prompt").get<std::vector<int32_t>>();
    greedy = golden.at("greedy_tokens").get<std::vector<int32_t>>();
    vocab = golden.at("vocab_size").get<int64_t>();
    std::ifstream logits(dir / golden.at("logits_file").get<std::string>(), std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(logits)), std::istreambuf_iterator<char>());
    reference.resize(bytes.size() / sizeof(float));
    std::memcpy(reference.data(), bytes.data(), reference.size() * sizeof(float));
  }
  size_t rows() const { return reference.size() / static_cast<size_t>(vocab); }
  const float* row(size_t r) const { return reference.data() + r * static_cast<size_t>(vocab); }
};

// max |a - b| / max |b| over one row of n values.
inline double relative_error(const float* a, const float* b, int64_t n) {
  double diff = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Every fixture folder the GPU tests run (relative to the repository root, where the tests run), sorted.
inline std::vector<std::string> golden_fixture_dirs() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("tests/fixtures/golden")) {
    if (std::filesystem::exists(entry.path() / "golden.json")) names.push_back(entry.path().string());
  }
  names.push_back("tests/fixtures/chat_tiny");
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace imp::testing_support
