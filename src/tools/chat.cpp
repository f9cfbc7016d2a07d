// imp chat: an interactive conversation in the terminal. Each user line is added to the conversation,
// the model's chat template renders it, and the reply streams as it decodes: reasoning dimmed (on a
// terminal), then the answer, then any tool calls. The sequence's state is reused when the new prompt
// extends what the model has already seen; otherwise the conversation is prefilled again.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/stop_tokens.h"
#include "text/chat_template.h"
#include "text/output_parser.h"
#include "text/tokenizer.h"
#include "tools/commands.h"
#include "tools/sampling_options.h"

namespace imp::tools {
namespace {

struct ChatOptions {
  std::string model_dir;
  std::string backend = "cpu";
  std::string system;
  std::string kwargs = "{}";
  bool no_think = false;
  int64_t max_tokens = 1024;
  runtime::SamplingOptions sampling;
};

class ChatSession {
 public:
  explicit ChatSession(const ChatOptions& options)
      : options_(options),
        engine_(runtime::load_engine(options.model_dir, {.backend = options.backend})),
        tokenizer_(text::Tokenizer::load(options.model_dir)),
        template_(text::ChatTemplate::load(options.model_dir)),
        stops_(runtime::load_stop_tokens(options.model_dir, engine_->config())),
        color_(::isatty(STDOUT_FILENO) != 0) {
    kwargs_ = nlohmann::ordered_json::parse(options.kwargs, nullptr, false);
    if (kwargs_.is_discarded() || !kwargs_.is_object()) fail("--kwargs must be a JSON object, got '{}'", options.kwargs);
    if (options.no_think) kwargs_["enable_thinking"] = false;
    reset();
  }

  void reset() {
    messages_ = nlohmann::ordered_json::array();
    if (!options_.system.empty()) messages_.push_back({{"role", "system"}, {"content", options_.system}});
  }

  void drop_last_message() {
    if (!messages_.empty()) messages_.erase(messages_.size() - 1);
  }

  void turn(const std::string& user_text) {
    messages_.push_back({{"role", "user"}, {"content", user_text}});
    const std::string rendered = template_.render(messages_, nullptr, true, kwargs_);
    const std::vector<int32_t> prompt = tokenizer_.encode(rendered);

    // Reuse the sequence when the model has seen a prefix of this prompt.
    const bool reusable = sequence_ && seen_.size() < prompt.size() && std::equal(seen_.begin(), seen_.end(), prompt.begin());
    if (!reusable) {
      if (sequence_) engine_->release(*sequence_);
      sequence_ = engine_->new_sequence();
      seen_.clear();
    }
    const std::span<const int32_t> fresh = std::span(prompt).subspan(seen_.size());
    runtime::ForwardRequest request{.sequence = *sequence_, .tokens = fresh, .all_logits = false};
    std::vector<float> logits = std::move(engine_->forward({&request, 1}).front());
    seen_ = prompt;

    text::OutputParserOptions parse_options;
    parse_options.starts_in_reasoning = text::prompt_opens_reasoning(rendered);
    text::OutputParser parser(parse_options);
    text::IncrementalDetokenizer detokenizer(tokenizer_);
    runtime::Sampler sampler(options_.sampling);
    text::ParsedOutput reply;
    for (int64_t n = 0;; ++n) {
      const int32_t token = sampler.sample(logits);
      const bool stop = std::find(stops_.begin(), stops_.end(), token) != stops_.end();
      const bool last = stop || n + 1 >= options_.max_tokens;
      if (!stop) show(parser.feed(detokenizer.push(token)), reply);
      if (last) {
        show(parser.feed(detokenizer.finish()), reply);
        show(parser.finish(), reply);
        break;
      }
      const int32_t next[1] = {token};
      request = {.sequence = *sequence_, .tokens = next, .all_logits = false};
      logits = std::move(engine_->forward({&request, 1}).front());
      seen_.push_back(token);
    }
    end_style();
    fmt::print("\n");
    std::fflush(stdout);

    nlohmann::ordered_json message = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
    if (reply.has_tool_calls()) {
      message["tool_calls"] = nlohmann::ordered_json::array();
      for (const text::ToolCall& call : reply.tool_calls) {
        message["tool_calls"].push_back({{"id", call.id}, {"type", "function"},
                                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    messages_.push_back(std::move(message));
  }

 private:
  // Prints events as they come: reasoning dimmed on a terminal, tool calls on their own line.
  void show(const std::vector<text::OutputEvent>& events, text::ParsedOutput& reply) {
    for (const text::OutputEvent& event : events) {
      text::apply_event(reply, event);
      switch (event.kind) {
        case text::OutputEventKind::reasoning:
          style(color_ ? "\x1b[2m" : "");
          fmt::print("{}", event.text);
          break;
        case text::OutputEventKind::content:
          end_style();
          fmt::print("{}", event.text);
          break;
        case text::OutputEventKind::tool_call_start:
          end_style();
          fmt::print("\n[tool call {}] {}(", event.id, event.name);
          break;
        case text::OutputEventKind::tool_call_arguments:
          fmt::print("{})\n", event.text);
          break;
      }
    }
    std::fflush(stdout);
  }
  void style(const char* code) {
    if (!styled_ && *code) fmt::print("{}", code);
    styled_ = styled_ || *code;
  }
  void end_style() {
    if (styled_) fmt::print("\x1b[0m");
    styled_ = false;
  }

  ChatOptions options_;
  std::unique_ptr<runtime::Engine> engine_;
  text::Tokenizer tokenizer_;
  text::ChatTemplate template_;
  std::vector<int32_t> stops_;
  nlohmann::ordered_json kwargs_;
  nlohmann::ordered_json messages_;
  std::optional<runtime::SequenceId> sequence_;
  std::vector<int32_t> seen_;  // the tokens the sequence holds
  bool color_;
  bool styled_ = false;
};

int run_chat(const ChatOptions& options) {
  ChatSession session(options);
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  if (interactive) fmt::print(stderr, "imp chat: type a message; /reset starts over, /exit or Ctrl-D quits\n");
  std::string line;
  while (true) {
    if (interactive) fmt::print(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      continue;
    }
    if (line.empty()) continue;
    try {
      session.turn(line);
    } catch (const text::jinja::TemplateError& error) {  // e.g. the template's raise_exception: say so, keep chatting
      fmt::print(stderr, "imp chat: the chat template refused this turn: {}\n", error.what());
      session.drop_last_message();
    }
  }
  return 0;
}

void add_chat(CLI::App& app, std::function<int()>& run) {
  auto options = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model in the terminal (its chat template and tokenizer)");
  cmd->add_option("--model", options->model_dir, "Model folder")->required();
  cmd->add_option("--backend", options->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--system", options->system, "System message");
  cmd->add_flag("--no-think", options->no_think, "Render with enable_thinking=false");
  cmd->add_option("--kwargs", options->kwargs, "Extra chat-template variables as a JSON object");
  cmd->add_option("--max-tokens", options->max_tokens, "Most tokens per reply")->capture_default_str();
  add_sampling_options(*cmd, options->sampling);
  cmd->callback([&run, options] { run = [options] { return run_chat(*options); }; });
}

const Registration kRegistration(add_chat);

}  // namespace
}  // namespace imp::tools
