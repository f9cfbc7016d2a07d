#include "server/prompt.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "text/jinja/error.h"
#include "text/reasoning_parser.h"

namespace imp::server {
namespace {

// Checks the prompt against the context and settles max_tokens.
int64_t fit_context(const ServedModel& model, size_t prompt_size, const std::optional<int64_t>& max_tokens) {
  const auto prompt = static_cast<int64_t>(prompt_size);
  if (prompt >= model.max_context) {
    throw ApiError(400, fmt::format("the prompt is {} tokens but the context length is {}; shorten the messages", prompt,
                                    model.max_context), "messages", "context_length_exceeded");
  }
  if (!max_tokens) return model.max_context - prompt;
  if (prompt + *max_tokens > model.max_context) {
    throw ApiError(400, fmt::format("max_tokens {} plus the prompt's {} tokens exceed the context length {}; "
                                    "ask for at most {}", *max_tokens, prompt, model.max_context, model.max_context - prompt),
                   "max_tokens", "context_length_exceeded");
  }
  return *max_tokens;
}

// tool_choice required or a named function: the answer starts with the opening of a call (tool_call_opening.h),
// after closing a thought the generation prompt opened. "" for auto and none.
std::string forced_tool_call_opening(const ServedModel& model, const ChatRequest& request) {
  if (request.tool_choice != ToolChoice::required && request.tool_choice != ToolChoice::named) return {};
  if (model.tool_call_format == text::ToolCallFormat::unknown) {
    bad_request("tool_choice", "tool_choice '{}' cannot be enforced: this model's chat template shows no tool-call format "
                "the server knows (<tool_call> JSON or <function=...> XML); use 'auto'",
                request.tool_choice == ToolChoice::named ? "function" : "required");
  }
  return text::tool_call_opening(model.tool_call_format, request.tool_choice == ToolChoice::named ? request.tool_name : "");
}

}  // namespace

std::unique_ptr<ServedModel> ServedModel::load(const std::filesystem::path& model_dir, std::string id, std::vector<int32_t> stop_tokens,
                              int64_t max_context, int64_t vocab_size) {
  auto loaded = std::make_unique<ServedModel>(ServedModel{
      .id = std::move(id), .tokenizer = text::Tokenizer::load(model_dir), .chat_template = std::nullopt,
      .stop_tokens = std::move(stop_tokens), .max_context = max_context, .vocab_size = vocab_size, .encoder = nullptr});
  ServedModel& model = *loaded;
  try {
    model.chat_template = text::ChatTemplate::load(model_dir);
    model.tool_call_format = text::detect_tool_call_format(model.chat_template->tool_source());
    log::info("tool calls: {} format (what tool_choice required or a named function starts the answer with)",
              text::tool_call_format_name(model.tool_call_format));
  } catch (const Error& error) {
    log::warn("no chat template ({}): /v1/chat/completions will refuse requests; /v1/completions works", error.what());
  }
  model.encoder = std::make_unique<EncodePool>(model.tokenizer, std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  if (model.tokenizer.vocab_size() > vocab_size) {
    fail("the tokenizer has {} tokens but the model's vocab_size is {}", model.tokenizer.vocab_size(), vocab_size);
  }
  return loaded;
}

PreparedPrompt prepare_chat(const ServedModel& model, const ChatRequest& request) {
  if (!model.chat_template) bad_request("messages", "this model folder has no chat template; use /v1/completions");
  // tool_choice none: the model is not offered the tools and its output is never read as calls.
  nlohmann::ordered_json tools = request.tool_choice == ToolChoice::none ? nlohmann::ordered_json() : request.tools;
  if (request.tool_choice == ToolChoice::named) {
    nlohmann::ordered_json only = nlohmann::ordered_json::array();
    for (const auto& tool : request.tools) {
      if (tool["function"]["name"] == request.tool_name) only.push_back(tool);
    }
    tools = std::move(only);
  }
  std::string rendered;
  try {
    rendered = model.chat_template->render(request.messages, tools, true, request.template_kwargs);
  } catch (const text::jinja::TemplateError& error) {
    throw ApiError(400, fmt::format("the chat template refused the messages: {}", error.what()), "messages",
                   "template_error");
  } catch (const Error& error) {
    throw ApiError(400, fmt::format("the messages cannot be rendered: {}", error.what()), "messages", "template_error");
  }
  PreparedPrompt out;
  out.parser.prefix = forced_tool_call_opening(model, request);
  if (!out.parser.prefix.empty()) rendered += text::close_open_reasoning(rendered) + out.parser.prefix;
  out.tokens = model.encode(rendered);
  if (out.tokens.empty()) bad_request("messages", "the rendered messages encode to no tokens");
  out.max_tokens = fit_context(model, out.tokens.size(), request.max_tokens);
  out.parser.starts_in_reasoning = text::prompt_opens_reasoning(rendered);
  out.parser.parse_tool_calls = !tools.is_null() && !tools.empty();
  if (out.parser.parse_tool_calls) out.parser.tools = text::ToolSchemas::from_openai_tools(tools);
  return out;
}

PreparedPrompt prepare_completion(const ServedModel& model, const CompletionRequest& request) {
  PreparedPrompt out;
  if (request.prompt_is_tokens) {
    for (int32_t id : request.prompt_tokens) {
      if (id >= model.vocab_size) bad_request("prompt", "token id {} is outside the vocabulary (size {})", id, model.vocab_size);
    }
    out.tokens = request.prompt_tokens;
  } else {
    out.tokens = model.encode(request.prompt);
  }
  if (out.tokens.empty()) bad_request("prompt", "the prompt encodes to no tokens");
  out.max_tokens = fit_context(model, out.tokens.size(), request.max_tokens);
  // Plain completions: the text is all content.
  out.parser.parse_reasoning = false;
  out.parser.parse_tool_calls = false;
  return out;
}

}  // namespace imp::server
