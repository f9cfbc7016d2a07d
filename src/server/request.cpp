#include "server/request.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace imp::server {
namespace {

using Json = nlohmann::ordered_json;

const char* type_name(const Json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

// Depth of [ and { outside strings; the parser's own recursion and the templates' stay bounded.
void check_depth(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) bad_request("", "the request JSON nests deeper than {} levels", kMaxJsonDepth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// Reads one object's fields by name; absent and null are the same ("use the default").
class Fields {
 public:
  Fields(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  const Json* get(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string name(const char* key) const { return prefix_ + key; }

  std::optional<bool> boolean(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad_request(name(key), "'{}' must be a boolean, got {}", name(key), type_name(*v));
    return v->get<bool>();
  }
  std::optional<double> number(const char* key, double lo, double hi) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad_request(name(key), "'{}' must be a number, got {}", name(key), type_name(*v));
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) bad_request(name(key), "'{}' must be in [{}, {}], got {}", name(key), lo, hi, x);
    return x;
  }
  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) bad_request(name(key), "'{}' must be an integer, got {}", name(key), type_name(*v));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad_request(name(key), "'{}' must be in [{}, {}], got {}", name(key), lo, hi, v->get<uint64_t>());
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) bad_request(name(key), "'{}' must be in [{}, {}], got {}", name(key), lo, hi, x);
    return x;
  }
  std::optional<std::string> string(const char* key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad_request(name(key), "'{}' must be a string, got {}", name(key), type_name(*v));
    return v->get<std::string>();
  }
  const Json* object(const char* key) const {
    const Json* v = get(key);
    if (v && !v->is_object()) bad_request(name(key), "'{}' must be an object, got {}", name(key), type_name(*v));
    return v;
  }
  const Json* array(const char* key) const {
    const Json* v = get(key);
    if (v && !v->is_array()) bad_request(name(key), "'{}' must be an array, got {}", name(key), type_name(*v));
    return v;
  }

 private:
  const Json& object_;
  std::string prefix_;
};

void parse_common(const Fields& f, GenerationParams& out) {
  const std::optional<std::string> model = f.string("model");
  if (!model || model->empty()) bad_request("model", "'model' is required (GET /v1/models lists the served model)");
  out.model = *model;
  out.stream = f.boolean("stream").value_or(false);
  if (const Json* options = f.object("stream_options")) {
    if (!out.stream) bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    out.include_usage = Fields(*options, "stream_options.").boolean("include_usage").value_or(false);
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (auto n = f.integer("n", 1, kMaxInt); n && *n != 1) bad_request("n", "'n' must be 1 (one choice per request), got {}", *n);
  out.max_tokens = f.integer("max_tokens", 1, kMaxInt);
  if (auto m = f.integer("max_completion_tokens", 1, kMaxInt)) out.max_tokens = m;

  runtime::SamplingOptions& s = out.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0.0, 2.0).value_or(1.0));
  s.top_p = static_cast<float>(f.number("top_p", 0.0, 1.0).value_or(1.0));
  if (s.top_p <= 0.0f) bad_request("top_p", "'top_p' must be in (0, 1], got 0");
  const int64_t top_k = f.integer("top_k", -1, kMaxInt).value_or(0);
  s.top_k = top_k < 0 ? 0 : top_k;  // -1 (vLLM) and 0 both mean off
  s.min_p = static_cast<float>(f.number("min_p", 0.0, 1.0).value_or(0.0));
  s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2.0, 2.0).value_or(0.0));
  s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2.0, 2.0).value_or(0.0));
  if (auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
    out.has_seed = true;
  }

  if (const Json* stop = f.get("stop")) {
    if (stop->is_string()) {
      out.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 4) bad_request("stop", "'stop' holds at most 4 strings, got {}", stop->size());
      for (const Json& item : *stop) {
        if (!item.is_string()) bad_request("stop", "'stop' must be a string or an array of strings, found {}", type_name(item));
        out.stop.push_back(item.get<std::string>());
      }
    } else {
      bad_request("stop", "'stop' must be a string or an array of strings, got {}", type_name(*stop));
    }
    for (const std::string& text : out.stop) {
      if (text.empty()) bad_request("stop", "'stop' strings must not be empty");
    }
  }
  out.ignore_eos = f.boolean("ignore_eos").value_or(false);
  out.forced_output = f.string("imp_forced_output");
  if (const Json* format = f.object("response_format")) {
    const auto type = Fields(*format, "response_format.").string("type");
    if (type && *type != "text") bad_request("response_format", "'response_format' type '{}' is not supported (only text)", *type);
  }
}

// A message's content: a string, null, or text parts (joined with newlines, as vLLM does).
Json normalize_content(const Json& content, const std::string& where, bool null_ok) {
  if (content.is_string()) return content;
  if (content.is_null()) {
    if (!null_ok) bad_request(where, "'{}' must be a string or an array of text parts, got null", where);
    return content;
  }
  if (!content.is_array()) bad_request(where, "'{}' must be a string or an array of text parts, got {}", where, type_name(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) bad_request(at, "'{}' must be an object, got {}", at, type_name(part));
    const Fields f(part, at + ".");
    const auto type = f.string("type");
    if (!type) bad_request(at + ".type", "'{}.type' is required", at);
    if (*type != "text") bad_request(at + ".type", "content part type '{}' is not supported (text only)", *type);
    const auto piece = f.string("text");
    if (!piece) bad_request(at + ".text", "'{}.text' is required", at);
    if (i > 0) text += '\n';
    text += *piece;
  }
  return text;
}

Json normalize_tool_calls(const Json& calls, const std::string& where) {
  if (!calls.is_array()) bad_request(where, "'{}' must be an array, got {}", where, type_name(calls));
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!calls[i].is_object()) bad_request(at, "'{}' must be an object, got {}", at, type_name(calls[i]));
    Json call = calls[i];
    const Json* function = Fields(call, at + ".").object("function");
    if (!function) bad_request(at + ".function", "'{}.function' is required", at);
    const Fields f(*function, at + ".function.");
    const auto name = f.string("name");
    if (!name || name->empty()) bad_request(at + ".function.name", "'{}.function.name' must be a non-empty string", at);
    // Templates iterate arguments as a mapping (vLLM parses them too); text that is not a JSON object stays.
    if (const Json* arguments = f.get("arguments"); arguments && arguments->is_string()) {
      Json parsed = Json::parse(arguments->get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) call["function"]["arguments"] = std::move(parsed);
    }
    out.push_back(std::move(call));
  }
  return out;
}

Json normalize_messages(const Json* messages) {
  if (!messages || !messages->is_array() || messages->empty()) {
    bad_request("messages", "'messages' must be a non-empty array of message objects");
  }
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    const Json& message = (*messages)[i];
    if (!message.is_object()) bad_request(at, "'{}' must be an object, got {}", at, type_name(message));
    const Fields f(message, at + ".");
    auto role = f.string("role");
    if (!role) bad_request(at + ".role", "'{}.role' is required", at);
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      bad_request(at + ".role", "'{}.role' must be system, developer, user, assistant or tool, got '{}'", at, *role);
    }
    Json copy = message;
    copy["role"] = *role;
    const bool assistant = *role == "assistant";
    auto content = message.find("content");
    if (content == message.end()) {
      if (!assistant) bad_request(at + ".content", "'{}.content' is required", at);
      copy["content"] = nullptr;
    } else {
      copy["content"] = normalize_content(*content, at + ".content", assistant);
    }
    if (const Json* calls = f.get("tool_calls")) {
      if (!assistant) bad_request(at + ".tool_calls", "only assistant messages carry 'tool_calls'");
      copy["tool_calls"] = normalize_tool_calls(*calls, at + ".tool_calls");
    } else if (assistant && copy["content"].is_null()) {
      bad_request(at + ".content", "'{}' needs 'content' or 'tool_calls'", at);
    }
    // A tool-calling assistant turn without text: templates expect a string (vLLM renders it as "").
    if (copy["content"].is_null()) copy["content"] = "";
    f.string("tool_call_id");
    f.string("name");
    out.push_back(std::move(copy));
  }
  return out;
}

Json validate_tools(const Json* tools) {
  if (!tools) return nullptr;
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array, got {}", type_name(*tools));
  if (tools->empty()) return nullptr;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string at = fmt::format("tools[{}]", i);
    const Json& tool = (*tools)[i];
    if (!tool.is_object()) bad_request(at, "'{}' must be an object, got {}", at, type_name(tool));
    const Fields f(tool, at + ".");
    if (f.string("type").value_or("function") != "function") bad_request(at + ".type", "'{}.type' must be 'function'", at);
    const Json* function = f.object("function");
    if (!function) bad_request(at + ".function", "'{}.function' is required", at);
    const Fields g(*function, at + ".function.");
    const auto name = g.string("name");
    if (!name || name->empty()) bad_request(at + ".function.name", "'{}.function.name' must be a non-empty string", at);
    g.string("description");
    g.object("parameters");
  }
  return *tools;
}

void parse_tool_choice(const Fields& f, ChatRequest& out) {
  const Json* choice = f.get("tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string text = choice->get<std::string>();
    if (text == "auto") out.tool_choice = ToolChoice::automatic;
    else if (text == "none") out.tool_choice = ToolChoice::none;
    else if (text == "required") out.tool_choice = ToolChoice::required;
    else bad_request("tool_choice", "'tool_choice' must be auto, none, required or a function, got '{}'", text);
  } else if (choice->is_object()) {
    const Json* function = Fields(*choice, "tool_choice.").object("function");
    const auto name = function ? Fields(*function, "tool_choice.function.").string("name") : std::nullopt;
    if (!name) bad_request("tool_choice", "'tool_choice' as an object must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    out.tool_choice = ToolChoice::named;
    out.tool_name = *name;
  } else {
    bad_request("tool_choice", "'tool_choice' must be a string or an object, got {}", type_name(*choice));
  }
  if (out.tool_choice == ToolChoice::required || out.tool_choice == ToolChoice::named) {
    if (out.tools.is_null()) bad_request("tool_choice", "'tool_choice' {} needs 'tools'", out.tool_choice == ToolChoice::named ? "naming a function" : "required");
  }
  if (out.tool_choice == ToolChoice::named) {
    bool found = false;
    for (const Json& tool : out.tools) found = found || tool["function"]["name"] == out.tool_name;
    if (!found) bad_request("tool_choice", "'tool_choice' names function '{}', which is not in 'tools'", out.tool_name);
  }
}

}  // namespace

Json parse_json_object(std::string_view body) {
  check_depth(body);
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::parse_error& error) {
    const std::string what = error.what();
    if (what.find("UTF-8") != std::string::npos || what.find("surrogate") != std::string::npos) {
      bad_request("", "the request body is not valid UTF-8 (byte {})", error.byte);
    }
    bad_request("", "the request body is not valid JSON: {}", what);
  } catch (const Json::exception& error) {  // e.g. a number too large for a double
    bad_request("", "the request body is not valid JSON: {}", error.what());
  }
  if (!json.is_object()) bad_request("", "the request body must be a JSON object, got {}", type_name(json));
  return json;
}

ChatRequest parse_chat_request(std::string_view body) {
  const Json json = parse_json_object(body);
  const Fields f(json, "");
  ChatRequest out;
  parse_common(f, out);
  out.messages = normalize_messages(f.get("messages"));
  out.tools = validate_tools(f.get("tools"));
  parse_tool_choice(f, out);
  out.logprobs = f.boolean("logprobs").value_or(false);
  if (auto top = f.integer("top_logprobs", 0, 20)) {
    if (!out.logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    out.top_logprobs = static_cast<int>(*top);
  }
  if (const Json* kwargs = f.object("chat_template_kwargs")) out.template_kwargs = *kwargs;
  return out;
}

CompletionRequest parse_completion_request(std::string_view body) {
  const Json json = parse_json_object(body);
  const Fields f(json, "");
  CompletionRequest out;
  parse_common(f, out);
  const Json* prompt = f.get("prompt");
  if (!prompt) bad_request("prompt", "'prompt' is required");
  const Json* single = prompt;
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1) bad_request("prompt", "one prompt per request, got {}", prompt->size());
    single = &(*prompt)[0];
  }
  if (single->is_string()) {
    out.prompt = single->get<std::string>();
    if (out.prompt.empty()) bad_request("prompt", "'prompt' must not be empty");
  } else if (single->is_array()) {
    if (single->empty()) bad_request("prompt", "'prompt' must not be empty");
    for (const Json& id : *single) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        bad_request("prompt", "'prompt' as token ids must hold non-negative integers");
      }
      out.prompt_tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    out.prompt_is_tokens = true;
  } else {
    bad_request("prompt", "'prompt' must be a string or an array of token ids, got {}", type_name(*single));
  }
  if (f.boolean("echo").value_or(false)) bad_request("echo", "'echo' is not supported");
  if (auto suffix = f.string("suffix"); suffix && !suffix->empty()) bad_request("suffix", "'suffix' is not supported");
  if (auto best_of = f.integer("best_of", 1, 1 << 20); best_of && *best_of != 1) bad_request("best_of", "'best_of' must be 1");
  out.logprobs = static_cast<int>(f.integer("logprobs", 0, 5).value_or(-1));
  if (!out.max_tokens) out.max_tokens = 16;  // OpenAI's default for completions
  return out;
}

}  // namespace imp::server
