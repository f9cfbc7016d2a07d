// Chat template parity with Python jinja2 as Hugging Face sets it up: every conversation in
// tests/fixtures/templates/conversations rendered with every template must give the exact bytes
// that render_reference.py wrote (the CTest fixture template_references), or fail the same way:
// the same raise_exception message, an undefined-value error with jinja2's message, a type error.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "text/chat_template.h"

namespace imp::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct Case {
  std::string template_name;
  fs::path model_dir;
  fs::path conversation;
};

fs::path source_dir() { return fs::path(IMP_SOURCE_DIR); }
fs::path refs_dir() { return fs::path(IMP_TEMPLATE_REFS); }

std::vector<std::pair<std::string, fs::path>> templates() {
  return {{"qwen3", fs::path(IMP_QWEN3_TOKENIZER_DIR)},
          {"flash_next", source_dir() / "tests/fixtures/templates/flash_next"},
          {"features", source_dir() / "tests/fixtures/templates/features"}};
}

std::vector<fs::path> conversations() {
  std::vector<fs::path> files;
  const fs::path dir = source_dir() / "tests/fixtures/templates/conversations";
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& [name, dir] : templates()) {
    for (const fs::path& conversation : conversations()) cases.push_back({name, dir, conversation});
  }
  return cases;
}

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

ordered_json field(const ordered_json& conversation, const char* key) {
  return conversation.contains(key) ? conversation[key] : ordered_json(nullptr);
}

// The reference: the prompt, or the error object {"kind", "message"}.
struct Expected {
  bool ok = false;
  std::string prompt;
  std::string kind;
  std::string message;
};

Expected expected_for(const Case& c) {
  const fs::path base = refs_dir() / c.template_name / c.conversation.stem();
  Expected expected;
  if (fs::exists(base.string() + ".txt")) {
    expected.ok = true;
    expected.prompt = read_file(base.string() + ".txt");
  } else if (fs::exists(base.string() + ".error")) {
    const ordered_json error = ordered_json::parse(read_file(base.string() + ".error"));
    expected.kind = error["kind"].get<std::string>();
    expected.message = error["message"].get<std::string>();
  } else {
    ADD_FAILURE() << "no reference for " << base << " (run the template_references test first)";
  }
  return expected;
}

// gtest prints parameters on failure; keep it readable.
void PrintTo(const Case& c, std::ostream* os) { *os << c.template_name << "/" << c.conversation.stem().string(); }

class TemplateParity : public testing::TestWithParam<Case> {};

TEST_P(TemplateParity, MatchesJinja2) {
  const Case& c = GetParam();
  const Expected expected = expected_for(c);
  if (!expected.ok && expected.kind.empty()) return;
  const ordered_json conversation = ordered_json::parse(read_file(c.conversation));
  const ChatTemplate chat_template = ChatTemplate::load(c.model_dir);
  auto render = [&] {
    return chat_template.render(conversation["messages"], field(conversation, "tools"),
                                conversation.value("add_generation_prompt", false), field(conversation, "kwargs"));
  };
  if (expected.ok) {
    std::string prompt;
    ASSERT_NO_THROW(prompt = render());
    EXPECT_EQ(prompt, expected.prompt);
    return;
  }
  try {
    const std::string prompt = render();
    FAIL() << "jinja2 raised " << expected.kind << " (" << expected.message << ") but imp rendered:\n" << prompt;
  } catch (const jinja::TemplateError& error) {
    if (expected.kind == "raise_exception") {
      EXPECT_EQ(error.kind(), jinja::ErrorKind::kRaised) << error.what();
      EXPECT_EQ(error.message(), expected.message);
    } else if (expected.kind == "UndefinedError") {
      EXPECT_EQ(error.kind(), jinja::ErrorKind::kUndefined) << error.what();
      EXPECT_EQ(error.message(), expected.message);
    } else {
      EXPECT_NE(error.kind(), jinja::ErrorKind::kRaised) << error.what();
      EXPECT_NE(error.kind(), jinja::ErrorKind::kUnsupported) << error.what();
    }
    EXPECT_GT(error.line(), 0) << error.what();
  }
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.template_name + "_" + info.param.conversation.stem().string();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Conversations, TemplateParity, testing::ValuesIn(all_cases()), case_name);

TEST(TemplateFixtures, EnoughConversationsAndTemplates) {
  EXPECT_GE(conversations().size(), 30u);
  for (const auto& [name, dir] : templates()) {
    EXPECT_TRUE(fs::exists(dir / "tokenizer_config.json")) << name << ": missing " << dir;
  }
}

// The `imp template` command prints the same bytes (no newline added) and exits 1 on template errors.
TEST(TemplateCli, PrintsReferencePrompts) {
  const fs::path work = fs::temp_directory_path() / fmt::format("imp_template_cli_{}", ::getpid());
  fs::create_directories(work);
  int checked = 0;
  for (const Case& c : all_cases()) {
    const Expected expected = expected_for(c);
    const ordered_json conversation = ordered_json::parse(read_file(c.conversation));
    std::ofstream(work / "messages.json") << conversation["messages"].dump();
    std::string command = fmt::format("{} template --model '{}' --messages '{}'", IMP_BINARY, c.model_dir.string(),
                                      (work / "messages.json").string());
    if (conversation.contains("tools")) {
      std::ofstream(work / "tools.json") << conversation["tools"].dump();
      command += fmt::format(" --tools '{}'", (work / "tools.json").string());
    }
    if (conversation.value("add_generation_prompt", false)) command += " --add-generation-prompt";
    if (conversation.contains("kwargs")) {
      std::ofstream(work / "kwargs.json") << conversation["kwargs"].dump();
      command += fmt::format(" --kwargs \"$(cat '{}')\"", (work / "kwargs.json").string());
    }
    command += fmt::format(" > '{}' 2> '{}'", (work / "out.txt").string(), (work / "err.txt").string());
    const int raw = std::system(command.c_str());
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    const std::string name = c.template_name + "/" + c.conversation.stem().string();
    if (expected.ok) {
      EXPECT_EQ(status, 0) << name << ": " << read_file(work / "err.txt");
      EXPECT_EQ(read_file(work / "out.txt"), expected.prompt) << name;
    } else {
      EXPECT_EQ(status, 1) << name;
      if (expected.kind == "raise_exception") {
        EXPECT_NE(read_file(work / "err.txt").find(expected.message), std::string::npos) << name;
      }
    }
    ++checked;
  }
  fs::remove_all(work);
  EXPECT_GE(checked, 90);
}

}  // namespace
}  // namespace imp::text
