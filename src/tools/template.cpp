// imp template: render a model's chat template for a conversation and print the prompt exactly as
// Hugging Face's apply_chat_template(..., tokenize=False) would produce it (no newline added).
// A folder with tokenizer_config.json (or chat_template.jinja) is enough; no weights are read.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "text/chat_template.h"
#include "tools/commands.h"

namespace imp::tools {
namespace {

using nlohmann::ordered_json;

struct TemplateOptions {
  std::string model_dir;
  std::string messages_file;
  std::string tools_file;
  bool add_generation_prompt = false;
  std::string kwargs;
};

// Reads a JSON file ("-" is stdin), keeping object key order as written.
ordered_json read_json_file(const std::string& path, const char* what) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) fail("{} '{}': cannot read the file", what, path);
    std::ostringstream buffer;
    buffer << file.rdbuf();
    text = buffer.str();
  }
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& error) {
    fail("{} '{}': invalid JSON: {}", what, path, error.what());
  }
}

int run_template(const TemplateOptions& options) {
  const text::ChatTemplate chat_template = text::ChatTemplate::load(options.model_dir);
  ordered_json messages = read_json_file(options.messages_file, "--messages");
  ordered_json tools = nullptr;
  ordered_json kwargs = nullptr;
  bool add_generation_prompt = options.add_generation_prompt;
  // A conversation file (tests/fixtures/templates/conversations) brings its own tools, kwargs and
  // generation flag; the command-line options win. Other keys (a description) are not used.
  if (messages.is_object() && messages.contains("messages")) {
    const ordered_json conversation = std::move(messages);
    messages = conversation["messages"];
    if (conversation.contains("tools")) tools = conversation["tools"];
    if (conversation.contains("kwargs")) kwargs = conversation["kwargs"];
    add_generation_prompt |= conversation.value("add_generation_prompt", false);
  }
  if (!options.tools_file.empty()) tools = read_json_file(options.tools_file, "--tools");
  if (!options.kwargs.empty()) {
    ordered_json given;
    try {
      given = ordered_json::parse(options.kwargs);
    } catch (const ordered_json::exception& error) {
      fail("--kwargs: invalid JSON: {}", error.what());
    }
    if (!given.is_object()) fail("--kwargs must be a JSON object, e.g. '{{\"enable_thinking\": false}}'");
    if (!kwargs.is_object()) kwargs = ordered_json::object();
    for (auto it = given.begin(); it != given.end(); ++it) kwargs[it.key()] = it.value();
  }
  const std::string prompt = chat_template.render(messages, tools, add_generation_prompt, kwargs);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

void add_template(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<TemplateOptions>();
  CLI::App* cmd = app.add_subcommand("template", "Render the model's chat template for a conversation");
  cmd->add_option("--model", options->model_dir, "Model folder (tokenizer_config.json or chat_template.jinja)")
      ->required();
  cmd->add_option("--messages", options->messages_file,
                  "JSON file: a list of messages, or a conversation object with messages and optionally "
                  "tools, add_generation_prompt, kwargs ('-' for stdin)")
      ->required();
  cmd->add_option("--tools", options->tools_file, "JSON file with the list of tool schemas");
  cmd->add_flag("--add-generation-prompt", options->add_generation_prompt, "End with the assistant turn's header");
  cmd->add_option("--kwargs", options->kwargs,
                  "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  cmd->callback([&run, options] { run = [options] { return run_template(*options); }; });
}

const Registration kRegistration(add_template);

}  // namespace
}  // namespace imp::tools
