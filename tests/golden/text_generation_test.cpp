// Text in, text out against transformers + tokenizers on the tiny chat model (tests/fixtures/chat_tiny,
// made by scripts/make_chat_fixture.py): `imp generate --prompt` encodes like HF, generates HF's greedy
// tokens and streams exactly HF's decoded text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/subprocess.h"

namespace imp {
namespace {

namespace fs = std::filesystem;
using testing_support::run_process;

const fs::path kFixture = fs::path(IMP_SOURCE_DIR) / "tests" / "fixtures" / "chat_tiny";

nlohmann::json golden() {
  std::ifstream in(kFixture / "golden.json");
  return nlohmann::json::parse(in);
}

void expect_generation(const std::string& prompt_text, const nlohmann::json& prompt_ids,
                       const nlohmann::json& greedy, const std::string& continuation) {
  const auto result = run_process({IMP_BINARY, "-q", "generate", "--model", kFixture.string(), "--prompt", prompt_text,
                                   "--max-tokens", std::to_string(greedy.size()), "--ignore-eos", "--json"});
  ASSERT_EQ(result.status, 0) << result.out;
  const nlohmann::json out = nlohmann::json::parse(result.out);
  EXPECT_EQ(out.at("prompt_tokens"), prompt_ids);
  EXPECT_EQ(out.at("tokens"), greedy);
  EXPECT_EQ(out.at("text").get<std::string>(), continuation);
}

TEST(TextGeneration, PlainPromptMatchesTransformers) {
  const nlohmann::json g = golden();
  expect_generation(g.at("prompt_text"), g.at("prompt"), g.at("greedy_tokens"), g.at("continuation_text"));
}

TEST(TextGeneration, RenderedChatPromptMatchesTransformers) {
  const nlohmann::json chat = golden().at("chat");
  expect_generation(chat.at("rendered"), chat.at("prompt"), chat.at("greedy_tokens"), chat.at("continuation_text"));
}

TEST(TextGeneration, StreamedTextEqualsTheJsonText) {
  const nlohmann::json g = golden();
  const auto streamed = run_process({IMP_BINARY, "-q", "generate", "--model", kFixture.string(), "--prompt",
                                     g.at("prompt_text"), "--max-tokens", "24", "--ignore-eos"});
  ASSERT_EQ(streamed.status, 0);
  EXPECT_EQ(streamed.out, g.at("continuation_text").get<std::string>() + "\n");
}

// `imp chat` renders the conversation with the model's template, generates HF's greedy reply and keeps
// the conversation going (the second turn reuses or rebuilds the sequence).
TEST(TextGeneration, ChatReplyMatchesTransformers) {
  const nlohmann::json chat = golden().at("chat");
  const fs::path input = fs::temp_directory_path() / ("imp_chat_input_" + std::to_string(::getpid()));
  std::ofstream(input) << chat.at("messages")[1].at("content").get<std::string>() << "\nAnd a second turn.\n";
  const auto result = run_process({IMP_BINARY, "-q", "chat", "--model", kFixture.string(), "--system",
                                   chat.at("messages")[0].at("content"), "--max-tokens",
                                   std::to_string(chat.at("greedy_tokens").size())},
                                  true, input.string());
  fs::remove(input);
  ASSERT_EQ(result.status, 0);
  const std::string expected = chat.at("continuation_text").get<std::string>() + "\n";
  ASSERT_GE(result.out.size(), expected.size());
  EXPECT_EQ(result.out.substr(0, expected.size()), expected);
  EXPECT_GT(result.out.size(), expected.size());  // the second turn answered too
}

}  // namespace
}  // namespace imp
