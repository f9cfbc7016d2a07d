// The CPU reference engine against Hugging Face transformers on every golden fixture
// (tests/fixtures/golden, made by scripts/make_golden.py): logits at every prompt position and along the
// 32-token greedy continuation, identical greedy tokens, and prefill-then-decode equal to one long prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "../common/golden_fixture.h"
#include "cpu/forward.h"
#include "runtime/sampler.h"

namespace imp {
namespace {

namespace fs = std::filesystem;

// Relative tolerance of the issue: max |logit - HF| / max |HF logit| per position.
constexpr double kTolerance = 1e-4;

fs::path fixtures_dir() { return fs::path(IMP_SOURCE_DIR) / "tests" / "fixtures"; }

// Every folder of tests/fixtures/golden, plus the tiny chat model (same golden.json keys).
std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fixtures_dir() / "golden")) {
    if (fs::exists(entry.path() / "golden.json")) names.push_back("golden/" + entry.path().filename().string());
  }
  if (fs::exists(fixtures_dir() / "chat_tiny" / "golden.json")) names.push_back("chat_tiny");
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// A fixture by name under tests/fixtures.
struct Fixture : testing_support::GoldenFixture {
  explicit Fixture(const std::string& name) : GoldenFixture(fixtures_dir() / name) {}
};

using testing_support::relative_error;

void expect_rows_match(const std::vector<float>& ours, const Fixture& f, size_t first_ref_row, double tolerance,
                       const std::string& what) {
  const size_t rows = ours.size() / static_cast<size_t>(f.vocab);
  for (size_t r = 0; r < rows; ++r) {
    const double err = relative_error(ours.data() + r * static_cast<size_t>(f.vocab), f.row(first_ref_row + r), f.vocab);
    EXPECT_LE(err, tolerance) << what << ": row " << first_ref_row + r;
  }
}

class Golden : public testing::TestWithParam<std::string> {
 protected:
  static std::shared_ptr<cpu::Model> model(const fs::path& dir) {
    static std::map<std::string, std::shared_ptr<cpu::Model>> cache;
    auto& slot = cache[dir.string()];
    if (!slot) slot = std::make_shared<cpu::Model>(dir);
    return slot;
  }
};

TEST_P(Golden, PromptLogitsAndGreedyContinuationMatchTransformers) {
  const Fixture f(GetParam());
  auto m = model(f.dir);
  ASSERT_EQ(f.rows(), f.prompt.size() + f.greedy.size() - 1);

  cpu::SequenceState state = m->new_state();
  std::vector<float> logits = m->forward(state, f.prompt, true);
  ASSERT_EQ(logits.size(), f.prompt.size() * static_cast<size_t>(f.vocab));
  expect_rows_match(logits, f, 0, kTolerance, "prompt");

  std::vector<int32_t> tokens;
  std::vector<float> last(logits.end() - f.vocab, logits.end());
  for (size_t i = 0; i < f.greedy.size(); ++i) {
    tokens.push_back(runtime::argmax(last));
    if (i + 1 == f.greedy.size()) break;
    // Teacher-force HF's token so one early flip cannot cascade into every later row.
    const int32_t next[1] = {f.greedy[i]};
    last = m->forward(state, next, false);
    expect_rows_match(last, f, f.prompt.size() + i, kTolerance, "decode");
  }
  EXPECT_EQ(tokens, f.greedy);
}

TEST_P(Golden, PrefillThenDecodeEqualsOneLongPrefill) {
  const Fixture f(GetParam());
  auto m = model(f.dir);
  std::vector<int32_t> all = f.prompt;
  all.insert(all.end(), f.greedy.begin(), f.greedy.end() - 1);

  cpu::SequenceState whole_state = m->new_state();
  const std::vector<float> whole = m->forward(whole_state, all, true);

  // Two prefill chunks (the second one crossing the QSA budget on most fixtures), then token by token.
  cpu::SequenceState state = m->new_state();
  const size_t split = f.prompt.size() / 2;
  std::vector<float> stepwise = m->forward(state, std::span(all).first(split), true);
  const std::vector<float> second = m->forward(state, std::span(all).subspan(split, f.prompt.size() - split), true);
  stepwise.insert(stepwise.end(), second.begin(), second.end());
  for (size_t i = f.prompt.size(); i < all.size(); ++i) {
    const std::vector<float> row = m->forward(state, std::span(all).subspan(i, 1), false);
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  ASSERT_EQ(stepwise.size(), whole.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const double err = relative_error(stepwise.data() + r * f.vocab, whole.data() + r * f.vocab, f.vocab);
    EXPECT_LE(err, kTolerance / 10) << "row " << r;
  }
  EXPECT_EQ(state.length, whole_state.length);
}

// The command line reproduces the fixture: `imp generate ... --logits-out`.
TEST_P(Golden, CommandLineReproducesTheFixture) {
  const Fixture f(GetParam());
  const fs::path out = fs::temp_directory_path() / fmt::format("imp_golden_{}_{}.f32", fs::path(GetParam()).filename().string(), ::getpid());
  const std::string command = fmt::format(
      "{} -q generate --model {} --backend cpu --prompt-tokens {} --max-tokens {} --ignore-eos --json --logits-out {}",
      IMP_BINARY, f.dir.string(), fmt::join(f.prompt, ","), f.greedy.size(), out.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << command;
  const nlohmann::json result = nlohmann::json::parse(output);
  EXPECT_EQ(result.at("prompt_tokens").get<std::vector<int32_t>>(), f.prompt);
  EXPECT_EQ(result.at("tokens").get<std::vector<int32_t>>(), f.greedy);
  EXPECT_TRUE(result.at("timings").contains("decode_s"));
  const std::vector<float> logits = read_floats(out);
  fs::remove(out);
  ASSERT_EQ(logits.size(), f.reference.size());
  expect_rows_match(logits, f, 0, kTolerance, "--logits-out");
}

TEST_P(Golden, InspectWorks) {
  const Fixture f(GetParam());
  const std::string command = fmt::format("{} inspect --model {} > /dev/null", IMP_BINARY, f.dir.string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, testing::ValuesIn(fixture_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).filename().string();
                           for (char& ch : name) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(GoldenFixtures, ArePresent) { EXPECT_GE(fixture_names().size(), 8u) << "run scripts/make_golden.py"; }

}  // namespace
}  // namespace imp
