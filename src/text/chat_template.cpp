#include "text/chat_template.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/jinja/json.h"

namespace imp::text {
namespace {

namespace fs = std::filesystem;
using jinja::DictData;
using jinja::Value;
using nlohmann::ordered_json;

// transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order.
constexpr std::array<std::string_view, 7> kStandardTokens = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                             "pad_token", "cls_token", "mask_token"};
// Names under which a message's reasoning arrives; the first is what templates read (transformers'
// _REASONING_FIELDS).
constexpr std::array<std::string_view, 3> kReasoningFields = {"reasoning_content", "thinking", "reasoning"};

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot read", path.string());
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

ordered_json read_json(const fs::path& path) {
  try {
    return ordered_json::parse(read_file(path));
  } catch (const ordered_json::exception& error) {
    fail("{}: invalid JSON: {}", path.string(), error.what());
  }
}

// A special token is a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

void set_token(std::vector<std::pair<std::string, std::string>>& tokens, const std::string& name, std::string text) {
  for (auto& [key, value] : tokens) {
    if (key == name) {
      value = std::move(text);
      return;
    }
  }
  tokens.emplace_back(name, std::move(text));
}

// What HF's tokenizer exposes as special_tokens_map: the standard named tokens, then model-specific
// "*_token" entries and extra_special_tokens given as a name -> token object.
std::vector<std::pair<std::string, std::string>> special_tokens_of(ordered_json config, const fs::path& dir) {
  const fs::path legacy = dir / "special_tokens_map.json";
  if (!config.contains("added_tokens_decoder") && fs::exists(legacy)) {
    const ordered_json legacy_map = read_json(legacy);  // named: items() must not outlive a temporary
    for (const auto& [key, value] : legacy_map.items()) config[key] = value;
  }
  std::vector<std::pair<std::string, std::string>> tokens;
  for (std::string_view name : kStandardTokens) {
    const auto it = config.find(std::string(name));
    if (it == config.end()) continue;
    if (auto text = token_text(*it)) set_token(tokens, std::string(name), std::move(*text));
  }
  for (const auto& [key, value] : config.items()) {
    const bool standard = std::find(kStandardTokens.begin(), kStandardTokens.end(), key) != kStandardTokens.end();
    if (standard || !key.ends_with("_token")) continue;
    if (auto text = token_text(value)) set_token(tokens, key, std::move(*text));
  }
  if (const auto it = config.find("extra_special_tokens"); it != config.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (auto text = token_text(value)) set_token(tokens, key, std::move(*text));
    }
  }
  return tokens;
}

// HF copies a message's reasoning to both "thinking" and "reasoning_content":
// {"thinking": reasoning, **message, "reasoning_content": reasoning}.
DictData alias_reasoning(DictData message) {
  const Value* reasoning = nullptr;
  for (std::string_view field : kReasoningFields) {
    reasoning = message.find(field);
    if (reasoning != nullptr && !reasoning->is_none()) break;
    reasoning = nullptr;
  }
  if (reasoning == nullptr) return message;
  const Value value = *reasoning;
  const Value* thinking = message.find(std::string_view("thinking"));
  DictData out;
  out.items.emplace_back(Value("thinking"), thinking != nullptr ? *thinking : value);
  for (auto& [key, item] : message.items) {
    if (key.as_string() == "thinking") continue;
    out.items.emplace_back(key, key.as_string() == "reasoning_content" ? value : item);
  }
  if (message.find(std::string_view("reasoning_content")) == nullptr)
    out.items.emplace_back(Value("reasoning_content"), value);
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::load(const fs::path& model_dir) {
  if (!fs::is_directory(model_dir)) fail("{}: not a model folder", model_dir.string());
  const fs::path config_path = model_dir / "tokenizer_config.json";
  const ordered_json config = fs::exists(config_path) ? read_json(config_path) : ordered_json::object();
  if (!config.is_object()) fail("{}: expected a JSON object", config_path.string());

  // Template files take priority over the entries in tokenizer_config.json (transformers' rule).
  std::vector<std::tuple<std::string, std::string, std::string>> sources;  // name, label, source
  if (const fs::path file = model_dir / "chat_template.jinja"; fs::exists(file)) {
    sources.emplace_back("default", file.filename().string(), read_file(file));
  }
  if (const fs::path extra = model_dir / "additional_chat_templates"; fs::is_directory(extra)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(extra)) {
      if (entry.path().extension() == ".jinja") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      sources.emplace_back(file.stem().string(), "additional_chat_templates/" + file.filename().string(),
                           read_file(file));
    }
  }
  if (sources.empty()) {
    const auto it = config.find("chat_template");
    if (it != config.end() && it->is_string()) {
      sources.emplace_back("default", "tokenizer_config.json chat_template", it->get<std::string>());
    } else if (it != config.end() && it->is_array()) {
      for (const ordered_json& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
            !entry.contains("template") || !entry["template"].is_string()) {
          fail("{}: chat_template entries must be {{\"name\": ..., \"template\": ...}}", config_path.string());
        }
        const std::string name = entry["name"].get<std::string>();
        sources.emplace_back(name, "tokenizer_config.json chat_template '" + name + "'",
                             entry["template"].get<std::string>());
      }
    } else if (it != config.end() && !it->is_null()) {
      fail("{}: chat_template must be a string or a list of named templates", config_path.string());
    }
  }
  if (sources.empty()) {
    fail("{}: no chat template (expected chat_template.jinja or a \"chat_template\" entry in tokenizer_config.json)",
         model_dir.string());
  }

  ChatTemplate result;
  result.special_tokens_ = special_tokens_of(config, model_dir);
  for (auto& [name, label, source] : sources) {
    if (name == "default") result.default_source_ = source;
    result.templates_.push_back(Named{name, source, jinja::Template::parse(source, label)});
  }
  return result;
}

ChatTemplate ChatTemplate::from_source(std::string_view source,
                                       std::vector<std::pair<std::string, std::string>> special_tokens,
                                       std::string name) {
  ChatTemplate result;
  result.special_tokens_ = std::move(special_tokens);
  result.default_source_ = std::string(source);
  result.templates_.push_back(Named{"default", std::string(source), jinja::Template::parse(source, std::move(name))});
  return result;
}

std::optional<std::string> ChatTemplate::special_token(std::string_view name) const {
  for (const auto& [key, value] : special_tokens_) {
    if (key == name) return value;
  }
  return std::nullopt;
}

const ChatTemplate::Named& ChatTemplate::pick(bool has_tools) const {
  auto find = [this](std::string_view name) -> const Named* {
    for (const Named& named : templates_) {
      if (named.name == name) return &named;
    }
    return nullptr;
  };
  if (has_tools) {
    if (const Named* tool_use = find("tool_use")) return *tool_use;
  }
  if (const Named* fallback = find("default")) return *fallback;
  std::string names;
  for (const Named& named : templates_) names += (names.empty() ? "" : ", ") + named.name;
  fail("the model has several chat templates ({}) and none is named \"default\"", names);
}

std::string ChatTemplate::render(const ordered_json& messages, const ordered_json& tools, bool add_generation_prompt,
                                 const ordered_json& extra_kwargs) const {
  if (!messages.is_array()) fail("messages must be a JSON array of message objects");
  if (messages.empty()) fail("Cannot apply chat template to an empty conversation. Provide at least one message.");
  std::vector<Value> chat;
  chat.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& message = messages[i];
    if (!message.is_object()) fail("message {} must be a JSON object, got {}", i, message.dump());
    // HF drops keys whose value is null: templates handle a missing key better than None.
    DictData dict;
    for (auto it = message.begin(); it != message.end(); ++it) {
      if (!it.value().is_null()) dict.items.emplace_back(Value(it.key()), jinja::from_json(it.value()));
    }
    chat.push_back(Value::dict(alias_reasoning(std::move(dict))));
  }
  Value tool_schemas = Value::none();
  if (!tools.is_null()) {
    if (!tools.is_array()) fail("tools must be a JSON array of tool schemas");
    for (const ordered_json& tool : tools) {
      if (!tool.is_object()) fail("each tool must be a JSON object (a JSON schema), got {}", tool.dump());
    }
    tool_schemas = jinja::from_json(tools);
  }
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) fail("template kwargs must be a JSON object");

  DictData variables;
  for (const auto& [name, text] : special_tokens_) variables.set(Value(name), Value(text));
  if (extra_kwargs.is_object()) {
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
      const std::string& key = it.key();
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
        fail("template kwargs cannot set '{}': it has its own argument", key);
      }
      variables.set(Value(key), jinja::from_json(it.value()));
    }
  }
  variables.set(Value("messages"), Value::list(std::move(chat)));
  variables.set(Value("tools"), tool_schemas);
  variables.set(Value("documents"), Value::none());
  variables.set(Value("add_generation_prompt"), Value(add_generation_prompt));
  return pick(!tools.is_null()).parsed.render(variables);
}

}  // namespace imp::text
