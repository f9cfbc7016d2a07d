// Text and scalar filters (tojson, trim, replace, indent, int, round, ...) and the filter registry.
#include "text/jinja/filters.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "text/jinja/args.h"
#include "text/jinja/format.h"
#include "text/jinja/json.h"
#include "text/jinja/operators.h"
#include "text/jinja/strings.h"
#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value filter_tojson(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("tojson", args,
                           {{"ensure_ascii", Value(false)},
                            {"indent", Value::none()},
                            {"separators", Value::none()},
                            {"sort_keys", Value(false)}});
  JsonOptions options;
  options.ensure_ascii = a[0].truthy();
  if (a[1].is_integral()) {
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(a[1].as_int(), 0)), ' ');
  } else if (a[1].is_string()) {
    options.indent = a[1].as_string();
  } else if (!a[1].is_none()) {
    raise(ErrorKind::kType, "tojson indent must be an int or a string, not {}", a[1].type_name());
  }
  options.item_separator = options.indent ? "," : ", ";
  if (!a[2].is_none()) {
    const std::vector<Value> parts = iterate(a[2]);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      raise(ErrorKind::kType, "tojson separators must be two strings (item, key)");
    }
    options.item_separator = parts[0].as_string();
    options.key_separator = parts[1].as_string();
  }
  options.sort_keys = a[3].truthy();
  return Value(to_json(value, options));
}

Value filter_length(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("length", args);
  return Value(py_len(value));
}

Value filter_string(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("string", args);
  return soft_str(value);
}

Value filter_trim(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("trim", args, {{"chars", Value::none()}});
  std::optional<std::string> chars;
  if (!a[0].is_none()) chars = a[0].str();
  return Value(strings::strip(value.str(), chars));
}

Value filter_lower(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("lower", args);
  return Value(unicode::lower(value.str()));
}

Value filter_upper(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("upper", args);
  return Value(unicode::upper(value.str()));
}

Value filter_capitalize(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("capitalize", args);
  return Value(strings::capitalize(value.str()));
}

// jinja2's title: every run after "-", whitespace, "(", "{", "[" or "<" starts upper-case, the rest is lower.
Value filter_title(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("title", args);
  auto separator = [](char32_t cp) {
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || unicode::is_space(cp);
  };
  std::string out;
  bool run_start = true;
  bool in_separator = false;
  for (char32_t cp : unicode::decode(value.str())) {
    const bool sep = separator(cp);
    if (sep != in_separator) run_start = true;
    in_separator = sep;
    if (run_start) {
      unicode::append_upper(out, cp);
    } else {
      out += unicode::lower(unicode::encode(std::u32string(1, cp)));
    }
    run_start = false;
  }
  return Value(std::move(out));
}

Value filter_default(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("default", args, {{"default_value", Value("")}, {"boolean", Value(false)}});
  if (value.is_undefined() || (a[1].truthy() && !value.truthy())) return a[0];
  return value;
}

Value filter_replace(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("replace", args, {{"old"}, {"new"}, {"count", Value::none()}});
  const int64_t count = a[2].is_none() ? -1 : a[2].as_int();
  return Value(strings::replace(value.str(), a[0].str(), a[1].str(), count));
}

Value filter_safe(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("safe", args);
  return Value(value.str(), true);
}

Value filter_escape(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("escape", args);
  if (value.is_markup()) return value;
  return Value(strings::html_escape(value.str()), true);
}

Value filter_forceescape(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("forceescape", args);
  return Value(strings::html_escape(value.str()), true);
}

// Python's float(str): surrounding whitespace and "_" between digits allowed, inf/nan spelled out.
std::optional<double> parse_float(const std::string& text) {
  std::string s = strings::strip(text, std::nullopt);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    clean += s[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  std::string s = strings::strip(text, std::nullopt);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (i + 1 < s.size() && s[i] == '0') {
      const char p = static_cast<char>(s[i + 1] | 0x20);
      const int64_t prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (prefix_base != 0 && (base == 0 || base == prefix_base)) {
        base = prefix_base;
        i += 2;
        if (i < s.size() && s[i] == '_') ++i;
      }
    }
    if (base == 0) base = 10;
  }
  if (i >= s.size()) return std::nullopt;
  int64_t value = 0;
  bool last_underscore = true;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    const int digit = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
                      : std::isalpha(static_cast<unsigned char>(c)) ? (c | 0x20) - 'a' + 10
                                                                    : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value)) {
      raise(ErrorKind::kUnsupported, "integer '{}' does not fit in 64 bits", text);
    }
    last_underscore = false;
  }
  if (last_underscore) return std::nullopt;
  return negative ? -value : value;
}

Value float_to_int(double value) {
  if (std::isnan(value)) raise(ErrorKind::kType, "cannot convert float NaN to integer");
  if (std::isinf(value)) raise(ErrorKind::kType, "cannot convert float infinity to integer");
  const double truncated = std::trunc(value);
  if (std::fabs(truncated) >= 9.2e18) raise(ErrorKind::kUnsupported, "integer does not fit in 64 bits");
  return Value(static_cast<int64_t>(truncated));
}

Value filter_int(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("int", args, {{"default", Value(0)}, {"base", Value(10)}});
  if (value.is_integral()) return Value(value.as_int());
  if (value.is_float()) return float_to_int(value.as_float());
  if (value.is_string()) {
    if (auto parsed = parse_int(value.as_string(), a[1].is_integral() ? a[1].as_int() : 10)) return Value(*parsed);
    if (auto parsed = parse_float(value.as_string())) return float_to_int(*parsed);
  }
  return a[0];
}

Value filter_float(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("float", args, {{"default", Value(0.0)}});
  if (value.is_number()) return Value(value.as_float());
  if (value.is_string()) {
    if (auto parsed = parse_float(value.as_string())) return Value(*parsed);
  }
  return a[0];
}

Value filter_abs(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("abs", args);
  if (value.is_integral()) return value.as_int() < 0 ? negate(value) : Value(value.as_int());
  if (value.is_float()) return Value(std::fabs(value.as_float()));
  raise(ErrorKind::kType, "bad operand type for abs(): '{}'", value.type_name());
}

// Python's round(x, n): correctly rounded, ties to even (printf rounds the exact binary value the same way).
double round_half_even(double value, int64_t digits) {
  if (!std::isfinite(value)) return value;
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(value / scale) * scale;
  }
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), value);
  return std::strtod(buffer, nullptr);
}

Value filter_round(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("round", args, {{"precision", Value(0)}, {"method", Value("common")}});
  const std::string method = a[1].str();
  if (method != "common" && method != "ceil" && method != "floor") {
    raise(ErrorKind::kType, "method must be common, ceil or floor");
  }
  if (!value.is_number()) raise(ErrorKind::kType, "type {} doesn't define __round__ method", value.type_name());
  const int64_t precision = a[0].as_int();
  if (method == "common") {
    if (value.is_integral()) return Value(value.as_int());  // round(int, n) stays an int
    return Value(round_half_even(value.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = value.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value filter_indent(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("indent", args, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}});
  const std::string indention =
      a[0].is_string() ? a[0].as_string() : std::string(static_cast<size_t>(std::max<int64_t>(a[0].as_int(), 0)), ' ');
  const std::vector<std::string> lines = strings::splitlines(value.str() + "\n", false);
  std::string out;
  if (a[2].truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
  }
  if (a[1].truthy()) out = indention + out;
  return Value(std::move(out), value.is_markup());
}

Value filter_wordcount(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("wordcount", args);
  int64_t words = 0;
  bool in_word = false;
  for (char32_t cp : unicode::decode(value.str())) {
    const bool word = unicode::is_word(cp);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

Value filter_center(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("center", args, {{"width", Value(80)}});
  return Value(strings::pad(value.str(), a[0].as_int(), ' ', '^'));
}

Value filter_format(Evaluator&, const Value& value, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    raise(ErrorKind::kType, "can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) {
    DictData mapping;
    for (const auto& [k, v] : args.keyword) mapping.set(Value(k), v);
    return Value(percent_format(value.str(), Value::dict(std::move(mapping))));
  }
  return Value(percent_format(value.str(), Value::tuple(args.positional)));
}

Value filter_truncate(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args(
      "truncate", args,
      {{"length", Value(255)}, {"killwords", Value(false)}, {"end", Value("...")}, {"leeway", Value::none()}});
  const std::u32string text = unicode::decode(value.str());
  const std::string end = a[2].str();
  const int64_t length = a[0].as_int();
  const int64_t end_length = static_cast<int64_t>(unicode::length(end));
  const int64_t leeway = a[3].is_none() ? 5 : a[3].as_int();
  if (length < end_length) raise(ErrorKind::kType, "expected length >= {}, got {}", end_length, length);
  if (static_cast<int64_t>(text.size()) <= length + leeway) return Value(value.str());
  const std::string head =
      unicode::encode(std::u32string_view(text).substr(0, static_cast<size_t>(length - end_length)));
  if (a[1].truthy()) return Value(head + end);
  return Value(strings::rsplit(head, std::string(" "), 1).front() + end);
}

Value filter_attr(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("attr", args, {{"name"}});
  const std::string name = a[0].str();
  if (value.is_object()) return value.as_object().get_attr(name);
  if (value.is_dict() || value.is_undefined()) {
    // attr() skips item lookup; only Python attributes (methods) are found.
    const Value found = value.is_undefined() ? value : get_attribute(value, name);
    if (found.is_callable()) return found;
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", value.type_name(), name));
  }
  return get_attribute(value, name);
}

const FilterTable& filter_table() {
  static const FilterTable table = [] {
    FilterTable t = {
        {"tojson", filter_tojson},     {"length", filter_length},
        {"count", filter_length},      {"string", filter_string},
        {"trim", filter_trim},         {"lower", filter_lower},
        {"upper", filter_upper},       {"capitalize", filter_capitalize},
        {"title", filter_title},       {"default", filter_default},
        {"d", filter_default},         {"replace", filter_replace},
        {"safe", filter_safe},         {"escape", filter_escape},
        {"e", filter_escape},          {"forceescape", filter_forceescape},
        {"int", filter_int},           {"float", filter_float},
        {"abs", filter_abs},           {"round", filter_round},
        {"indent", filter_indent},     {"wordcount", filter_wordcount},
        {"center", filter_center},     {"format", filter_format},
        {"truncate", filter_truncate}, {"attr", filter_attr},
    };
    add_sequence_filters(t);
    return t;
  }();
  return table;
}

}  // namespace

Value soft_str(const Value& value) {
  if (value.is_string()) return value;
  return Value(value.str());
}

FilterFn find_filter(std::string_view name) {
  const auto it = filter_table().find(name);
  return it == filter_table().end() ? nullptr : it->second;
}

void raise_unknown_filter(std::string_view name) {
  static const std::set<std::string_view> kJinjaOnly = {"filesizeformat", "groupby", "pprint",   "random", "striptags",
                                                        "urlencode",      "urlize",  "wordwrap", "xmlattr"};
  if (kJinjaOnly.contains(name)) raise(ErrorKind::kUnsupported, "the '{}' filter is not supported", name);
  raise(ErrorKind::kSyntax, "no filter named '{}'", name);
}

}  // namespace imp::text::jinja
