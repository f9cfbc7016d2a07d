#include "text/tool_call_parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

namespace imp::text {

using namespace parser_detail;  // tags and matching helpers

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

namespace {

std::optional<ojson> parse_json(std::string_view text) {
  if (text.empty()) return std::nullopt;
  ojson value = ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// Compact, and never throws on invalid UTF-8 from the model (it becomes U+FFFD).
std::string dump(const ojson& value) { return value.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void collect_types(const json& schema, std::vector<std::string>& types) {
  if (!schema.is_object()) return;
  if (const auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) types.push_back(lower(it->get<std::string>()));
    if (it->is_array()) {
      for (const auto& t : *it) {
        if (t.is_string()) types.push_back(lower(t.get<std::string>()));
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const auto& option : *it) collect_types(option, types);
    }
  }
}

// At an opening tag (`<function` or `<parameter`, already matched at pos): reads `= NAME >` and moves pos past
// the '>'. A name must be non-empty and on one line.
std::optional<std::string> parse_tag_name(std::string_view body, size_t& pos, std::string_view tag) {
  size_t at = skip_space(body, pos + tag.size());
  if (at >= body.size() || body[at] != '=') return std::nullopt;
  const size_t close = body.find('>', at + 1);
  if (close == npos) return std::nullopt;
  const std::string_view name = trim(body.substr(at + 1, close - at - 1));
  if (name.empty() || name.find_first_of("<\n") != npos) return std::nullopt;
  pos = close + 1;
  return std::string(name);
}

// The `</parameter>` that ends a value: the first one followed by `<parameter=`, `</function>` or the end.
size_t find_value_end(std::string_view body, size_t from) {
  for (size_t at = body.find(kParameterClose, from); at != npos; at = body.find(kParameterClose, at + 1)) {
    const size_t next = skip_space(body, at + kParameterClose.size());
    if (next == body.size() || match_open(body, next, kParameterOpen) == Match::full ||
        match_at(body, next, kFunctionClose) == Match::full) {
      return at;
    }
  }
  return npos;
}

// What follows a `</parameter>` in a streamed body: full if it ends the value, partial if undecided yet.
Match value_end_follower(std::string_view body, size_t next) {
  if (next == body.size()) return Match::partial;
  const Match candidates[] = {match_open(body, next, kParameterOpen), match_at(body, next, kFunctionClose),
                              match_at(body, next, kToolCallClose)};
  if (std::ranges::find(candidates, Match::full) != std::end(candidates)) return Match::full;
  if (std::ranges::find(candidates, Match::partial) != std::end(candidates)) return Match::partial;
  return Match::none;
}

std::optional<ParsedCall> parse_json_call(std::string_view body) {
  const auto value = parse_json(trim(body));
  if (!value || !value->is_object()) return std::nullopt;
  const auto name = value->find("name");
  if (name == value->end() || !name->is_string() || trim(name->get_ref<const std::string&>()).empty()) {
    return std::nullopt;
  }
  auto args = value->find("arguments");
  if (args == value->end()) args = value->find("parameters");
  std::string arguments = "{}";
  if (args != value->end() && args->is_object()) {
    arguments = dump(*args);
  } else if (args != value->end() && args->is_string()) {  // already serialised by the model
    const auto inner = parse_json(trim(args->get_ref<const std::string&>()));
    if (!inner || !inner->is_object()) return std::nullopt;
    arguments = dump(*inner);
  } else if (args != value->end() && !args->is_null()) {
    return std::nullopt;
  }
  return ParsedCall{name->get<std::string>(), std::move(arguments)};
}

std::optional<ParsedCall> parse_xml_call(std::string_view body, const ToolSchemas& schemas) {
  size_t pos = skip_space(body, 0);
  if (match_open(body, pos, kFunctionOpen) != Match::full) return std::nullopt;
  auto name = parse_tag_name(body, pos, kFunctionOpen);
  if (!name) return std::nullopt;
  ojson args = ojson::object();
  for (;;) {
    pos = skip_space(body, pos);
    if (match_at(body, pos, kFunctionClose) == Match::full) {
      if (skip_space(body, pos + kFunctionClose.size()) != body.size()) return std::nullopt;
      break;
    }
    if (match_open(body, pos, kParameterOpen) != Match::full) return std::nullopt;
    auto param = parse_tag_name(body, pos, kParameterOpen);
    if (!param) return std::nullopt;
    const size_t end = find_value_end(body, pos);
    if (end == npos) return std::nullopt;
    args[*param] = convert_parameter_value(body.substr(pos, end - pos), schemas.parameter(*name, *param));
    pos = end + kParameterClose.size();
  }
  return ParsedCall{std::move(*name), dump(args)};
}

}  // namespace

ToolSchemas ToolSchemas::from_openai_tools(const json& tools) {
  ToolSchemas out;
  if (!tools.is_array()) return out;
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const json* function = &tool;
    if (const auto it = tool.find("function"); it != tool.end() && it->is_object()) function = &*it;
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string()) continue;
    json properties = json::object();
    if (const auto params = function->find("parameters"); params != function->end() && params->is_object()) {
      if (const auto props = params->find("properties"); props != params->end() && props->is_object()) {
        properties = *props;
      }
    }
    out.properties_[name->get<std::string>()] = std::move(properties);
  }
  return out;
}

const json* ToolSchemas::parameter(std::string_view function, std::string_view name) const {
  const auto it = properties_.find(function);
  if (it == properties_.end()) return nullptr;
  const auto param = it->second.find(std::string(name));
  return param == it->second.end() ? nullptr : &*param;
}

ojson convert_parameter_value(std::string_view raw, const json* schema) {
  std::string_view text = raw;  // the string form: one template newline off each end
  if (text.starts_with('\n')) text.remove_prefix(1);
  if (text.ends_with('\n')) text.remove_suffix(1);
  const std::string_view trimmed = trim(raw);

  std::vector<std::string> types;
  if (schema != nullptr) collect_types(*schema, types);
  const auto has = [&](std::string_view type) { return std::ranges::find(types, type) != types.end(); };
  if (types.empty()) {
    if (auto value = parse_json(trimmed)) return *value;
    return std::string(text);
  }
  if ((trimmed == "null" || trimmed == "None") && (has("null") || !has("string"))) return nullptr;
  if (has("string")) return std::string(text);
  if (has("boolean")) {
    const std::string word = lower(trimmed);
    if (word == "true" || word == "false") return word == "true";
  }
  if (has("integer") || has("number")) {
    if (auto value = parse_json(trimmed); value && value->is_number()) {
      if (value->is_number_float() && has("integer") && !has("number")) {
        const double d = value->get<double>();
        if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
      }
      return *value;
    }
  }
  if (has("object") || has("array")) {
    if (auto value = parse_json(trimmed);
        value && ((value->is_object() && has("object")) || (value->is_array() && has("array")))) {
      return *value;
    }
  }
  return std::string(text);
}

std::optional<ParsedCall> parse_tool_call_body(std::string_view body, const ToolSchemas& schemas) {
  const size_t start = skip_space(body, 0);
  if (start < body.size() && body[start] == '{') return parse_json_call(body);
  if (match_open(body, start, kFunctionOpen) == Match::full) return parse_xml_call(body, schemas);
  return std::nullopt;
}

size_t ToolCallEndScanner::scan(std::string_view body) {
  while (pos_ < body.size()) {
    const char c = body[pos_];
    if (format_ == Format::unknown) {  // decided by the first non-space text
      if (is_space(c)) {
        ++pos_;
        continue;
      }
      if (c == '{') {
        format_ = Format::json;
        continue;
      }
      const Match m = match_open(body, pos_, kFunctionOpen);
      if (m == Match::partial) return npos;
      format_ = m == Match::full ? Format::xml : Format::other;
      continue;
    }
    if (format_ == Format::json && in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"' || c == '\n') {  // a raw newline: invalid JSON, stop protecting the text
        in_string_ = false;
      }
      ++pos_;
      continue;
    }
    if (format_ == Format::json && c == '"') {
      in_string_ = true;
      ++pos_;
      continue;
    }
    if (format_ == Format::xml && in_param_) {
      const Match m = match_at(body, pos_, kParameterClose);
      if (m == Match::partial) return npos;
      if (m == Match::full) {
        const size_t next = skip_space(body, pos_ + kParameterClose.size());
        const Match follower = value_end_follower(body, next);
        if (follower == Match::partial) return npos;
        if (follower == Match::full) {
          in_param_ = false;
          pos_ = next;
          continue;
        }
      }
      ++pos_;
      continue;
    }
    if (c == '<') {
      const Match close = match_at(body, pos_, kToolCallClose);
      if (close == Match::full) return pos_;
      if (close == Match::partial) return npos;
      if (format_ == Format::xml) {
        const Match open = match_open(body, pos_, kParameterOpen);
        if (open == Match::partial) return npos;
        if (open == Match::full) {
          in_param_ = true;
          pos_ += kParameterOpen.size();
          continue;
        }
      }
    }
    ++pos_;
  }
  return npos;
}

ToolCallParser::ToolCallParser(ToolSchemas schemas, std::function<std::string(int)> make_id)
    : schemas_(std::move(schemas)), make_id_(std::move(make_id)) {}

void ToolCallParser::feed(std::string_view content, std::vector<OutputEvent>& out) {
  if (finished_) return;
  pending_ += content;
  advance(out, false);
}

void ToolCallParser::finish(std::vector<OutputEvent>& out) {
  if (finished_) return;
  advance(out, true);
  finished_ = true;
}

void ToolCallParser::advance(std::vector<OutputEvent>& out, bool final) {
  for (;;) {
    if (state_ == State::body) {
      if (!step_body(out, final)) return;
    } else if (state_ == State::after_call) {
      if (!step_after_call(final)) return;
    } else {
      const std::string_view p = pending_;
      if (const size_t open = p.find(kToolCallOpen); open != npos) {
        append_text(out, OutputEventKind::content, p.substr(0, open));
        pending_.erase(0, open + kToolCallOpen.size());
        state_ = State::body;
        scanner_ = ToolCallEndScanner{};
        continue;
      }
      size_t emit = p.size();
      if (!final) {
        emit = std::min(partial_tag_start(p, kToolCallOpen), emit);
        emit = utf8_complete_end(p.substr(0, emit));
      }
      append_text(out, OutputEventKind::content, p.substr(0, emit));
      pending_.erase(0, emit);
      return;
    }
  }
}

bool ToolCallParser::step_body(std::vector<OutputEvent>& out, bool final) {
  const size_t end = scanner_.scan(pending_);
  if (end == npos) {
    if (!final) return false;
    append_text(out, OutputEventKind::content, std::string(kToolCallOpen) + pending_);  // never closed
    pending_.clear();
    state_ = State::content;
    return false;
  }
  const std::string_view body = std::string_view(pending_).substr(0, end);
  if (auto call = parse_tool_call_body(body, schemas_)) {
    const int index = calls_++;
    std::string id = make_id_ ? make_id_(index) : "call_" + std::to_string(index);
    OutputEvent& start = out.emplace_back();
    start.kind = OutputEventKind::tool_call_start;
    start.index = index;
    start.id = std::move(id);
    start.name = std::move(call->name);
    OutputEvent& arguments = out.emplace_back();
    arguments.kind = OutputEventKind::tool_call_arguments;
    arguments.index = index;
    arguments.text = std::move(call->arguments);
    state_ = State::after_call;
  } else {
    append_text(out, OutputEventKind::content, std::string(kToolCallOpen).append(body).append(kToolCallClose));
    state_ = State::content;
  }
  pending_.erase(0, end + kToolCallClose.size());
  return true;
}

// Whitespace after a call is dropped if the next call or the end follows it, else it is content.
bool ToolCallParser::step_after_call(bool final) {
  const size_t at = skip_space(pending_, 0);
  const Match next = match_at(pending_, at, kToolCallOpen);
  if (next == Match::partial && !final) return false;
  if (next == Match::full || at == pending_.size()) pending_.erase(0, at);
  if (pending_.empty()) return false;
  state_ = State::content;
  return true;
}

}  // namespace imp::text
