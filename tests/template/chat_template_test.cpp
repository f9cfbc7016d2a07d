// ChatTemplate's side of apply_chat_template: which template a model folder provides, the special
// tokens it exposes, and how messages, tools and kwargs reach the template.
#include "text/chat_template.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace imp::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

class ChatTemplateLoad : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("imp_chat_template_{}_{}", ::getpid(),
                                                   testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  void write_config(const ordered_json& config) { write("tokenizer_config.json", config.dump(2)); }

  std::string render(const ordered_json& tools = nullptr, const ordered_json& kwargs = nullptr) {
    return ChatTemplate::load(dir_).render(ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), tools, false,
                                           kwargs);
  }

  fs::path dir_;
};

TEST_F(ChatTemplateLoad, TemplateFileWinsOverTokenizerConfig) {
  write_config({{"chat_template", "from config"}});
  write("chat_template.jinja", "from file\n");
  EXPECT_EQ(render(), "from file");  // and the trailing newline goes, as in jinja2
}

TEST_F(ChatTemplateLoad, ConfigStringTemplate) {
  write_config({{"chat_template", "{{ messages[0].content }}"}});
  EXPECT_EQ(render(), "hi");
}

TEST_F(ChatTemplateLoad, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  write_config(
      {{"chat_template", ordered_json::array({{{"name", "default"}, {"template", "plain"}},
                                              {{"name", "tool_use"}, {"template", "tools: {{ tools|length }}"}}})}});
  EXPECT_EQ(render(), "plain");
  EXPECT_EQ(render(ordered_json::array()), "tools: 0");  // HF checks `tools is not None`
  EXPECT_EQ(render(ordered_json::parse(R"([{"type": "function"}])")), "tools: 1");
}

TEST_F(ChatTemplateLoad, AdditionalTemplateFiles) {
  write("chat_template.jinja", "default file");
  write("additional_chat_templates/tool_use.jinja", "tool file");
  EXPECT_EQ(render(), "default file");
  EXPECT_EQ(render(ordered_json::array()), "tool file");
}

TEST_F(ChatTemplateLoad, NoDefaultAmongSeveralTemplatesIsAnError) {
  write_config({{"chat_template", ordered_json::array({{{"name", "rag"}, {"template", "x"}}})}});
  EXPECT_THROW(render(), imp::Error);
}

TEST_F(ChatTemplateLoad, MissingTemplateNamesTheFolder) {
  write_config({{"eos_token", "</s>"}});
  try {
    ChatTemplate::load(dir_);
    FAIL() << "loaded a folder without a template";
  } catch (const imp::Error& error) {
    EXPECT_NE(std::string(error.what()).find("no chat template"), std::string::npos) << error.what();
  }
}

TEST_F(ChatTemplateLoad, SyntaxErrorsNameTheFileAndLine) {
  write("chat_template.jinja", "ok\n{% if %}");
  try {
    ChatTemplate::load(dir_);
    FAIL() << "parsed a broken template";
  } catch (const jinja::TemplateError& error) {
    EXPECT_EQ(error.line(), 2);
    EXPECT_NE(std::string(error.what()).find("chat_template.jinja, line 2"), std::string::npos) << error.what();
  }
}

TEST_F(ChatTemplateLoad, SpecialTokensAsStringsAndAddedTokenObjects) {
  write_config({{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"special", true}}},
                {"eos_token", "</s>"},
                {"unk_token", nullptr},
                {"image_token", "<img>"},
                {"add_bos_token", true},
                {"extra_special_tokens", {{"audio_token", "<aud>"}}},
                {"chat_template",
                 "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ image_token }}|{{ audio_token }}|"
                 "{{ add_bos_token is defined }}"}});
  EXPECT_EQ(render(), "<s>|</s>|False|<img>|<aud>|False");
  const ChatTemplate loaded = ChatTemplate::load(dir_);
  EXPECT_EQ(loaded.special_token("eos_token"), "</s>");
  EXPECT_EQ(loaded.special_token("unk_token"), std::nullopt);
}

TEST_F(ChatTemplateLoad, KwargsOverrideSpecialTokensButNotArguments) {
  write_config({{"eos_token", "</s>"}, {"chat_template", "{{ eos_token }}{{ flag }}"}});
  EXPECT_EQ(render(nullptr, {{"eos_token", "<e>"}, {"flag", 1}}), "<e>1");
  EXPECT_THROW(render(nullptr, {{"messages", ordered_json::array()}}), imp::Error);
  EXPECT_THROW(render(nullptr, {{"add_generation_prompt", true}}), imp::Error);
}

TEST_F(ChatTemplateLoad, MessagesArePreparedLikeHuggingFace) {
  write_config({{"chat_template",
                 "{% for m in messages %}{{ m|list }}{{ m.name is defined }}{{ m.reasoning_content }};{% endfor %}"
                 "{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}"}});
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "q", "name": null},
    {"role": "assistant", "content": "a", "thinking": "t1"},
    {"role": "assistant", "content": "b", "reasoning": "r2", "reasoning_content": null}
  ])");
  EXPECT_EQ(ChatTemplate::load(dir_).render(messages),
            "['role', 'content']False;"
            "['thinking', 'role', 'content', 'reasoning_content']Falset1;"
            "['thinking', 'role', 'content', 'reasoning', 'reasoning_content']Falser2;"
            "TrueTrueFalse");
}

TEST_F(ChatTemplateLoad, ToolSchemasKeepTheirKeyOrder) {
  write_config({{"chat_template", "{{ tools[0]|tojson }}"}});
  const ordered_json tools =
      ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}])");
  EXPECT_EQ(render(tools), R"({"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}})");
}

TEST_F(ChatTemplateLoad, BadInputIsRefused) {
  write_config({{"chat_template", "x"}});
  const ChatTemplate tpl = ChatTemplate::load(dir_);
  EXPECT_THROW(tpl.render(ordered_json::array()), imp::Error);             // empty conversation
  EXPECT_THROW(tpl.render(ordered_json::object()), imp::Error);            // not a list
  EXPECT_THROW(tpl.render(ordered_json::parse(R"(["hi"])")), imp::Error);  // not a message object
  EXPECT_THROW(tpl.render(ordered_json::parse(R"([{"role": "user"}])"), ordered_json::object()), imp::Error);
  EXPECT_THROW(tpl.render(ordered_json::parse(R"([{"role": "user"}])"), nullptr, false, ordered_json::array()),
               imp::Error);
}

TEST(ChatTemplateQwen3, LoadsTheSharedTokenizerFolder) {
  const ChatTemplate tpl = ChatTemplate::load(IMP_QWEN3_TOKENIZER_DIR);
  EXPECT_EQ(tpl.special_token("eos_token"), "<|im_end|>");
  EXPECT_EQ(tpl.special_token("pad_token"), "<|endoftext|>");
  EXPECT_EQ(tpl.special_token("bos_token"), std::nullopt);
  EXPECT_EQ(tpl.render(ordered_json::parse(R"([{"role": "user", "content": "Hi"}])"), nullptr, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateFromSource, RendersWithGivenTokens) {
  const ChatTemplate tpl = ChatTemplate::from_source("{{ bos_token }}{{ messages|length }}", {{"bos_token", "<s>"}});
  EXPECT_EQ(tpl.render(ordered_json::parse(R"([{"role": "user", "content": "x"}, {"role": "user", "content": "y"}])")),
            "<s>2");
}

}  // namespace
}  // namespace imp::text
