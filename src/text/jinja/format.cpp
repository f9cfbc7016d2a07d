#include "text/jinja/format.h"

#include <cmath>
#include <cstdio>

#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

struct Spec {
  char fill = ' ';
  char align = 0;  // '<', '>', '^', '=' or 0 (type default)
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  int width = -1;
  int precision = -1;
  char type = 0;
  bool printf = false;  // printf-style right-aligns text unless "-"
};

std::string pad(std::string text, const Spec& spec, bool numeric) {
  const int64_t length = static_cast<int64_t>(unicode::length(text));
  if (spec.width <= length) return text;
  const size_t missing = static_cast<size_t>(spec.width - length);
  char align = spec.align != 0 ? spec.align : (numeric || spec.printf ? '>' : '<');
  char fill = spec.fill;
  if (spec.zero && spec.align == 0 && numeric) {
    align = '=';
    fill = '0';
  }
  if (align == '<') return text + std::string(missing, fill);
  if (align == '>') return std::string(missing, fill) + text;
  if (align == '^') return std::string(missing / 2, fill) + text + std::string(missing - missing / 2, fill);
  // '=': padding after the sign.
  const size_t sign_len = !text.empty() && (text[0] == '-' || text[0] == '+' || text[0] == ' ') ? 1 : 0;
  return text.substr(0, sign_len) + std::string(missing, fill) + text.substr(sign_len);
}

std::string format_number(const Value& value, const Spec& spec, std::string_view what) {
  if (!value.is_number()) {
    raise(ErrorKind::kType, "{} format: a real number is required, not {}", what, value.type_name());
  }
  char type = spec.type;
  std::string flags;
  if (spec.sign == '+' || spec.sign == ' ') flags += spec.sign;
  if (spec.alternate) flags += '#';
  char buffer[512];
  if (type == 'd' || type == 'i' || type == 'u' || type == 'x' || type == 'X' || type == 'o') {
    const int64_t n = value.is_float() ? static_cast<int64_t>(std::trunc(value.as_float())) : value.as_int();
    const char conv = type == 'i' || type == 'u' ? 'd' : type;
    std::snprintf(buffer, sizeof(buffer), ("%" + flags + "ll" + conv).c_str(), static_cast<long long>(n));
    return buffer;
  }
  const int precision = spec.precision < 0 ? 6 : std::min(spec.precision, 100);
  std::snprintf(buffer, sizeof(buffer), ("%" + flags + "." + std::to_string(precision) + type).c_str(),
                value.as_float());
  return buffer;
}

std::string convert(const Value& value, const Spec& spec, std::string_view what) {
  switch (spec.type) {
    case 's':
    case 0: {
      std::string text = value.str();
      if (spec.precision >= 0) {
        std::u32string cps = unicode::decode(text);
        if (static_cast<size_t>(spec.precision) < cps.size())
          text = unicode::encode(cps.substr(0, static_cast<size_t>(spec.precision)));
      }
      return pad(std::move(text), spec, false);
    }
    case 'r': return pad(value.repr(), spec, false);
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': return pad(format_number(value, spec, what), spec, true);
    case 'c': {
      std::string out;
      if (value.is_integral()) {
        unicode::append(out, static_cast<char32_t>(value.as_int()));
      } else if (value.is_string() && unicode::length(value.as_string()) == 1) {
        out = value.as_string();
      } else {
        raise(ErrorKind::kType, "%c requires int or char");
      }
      return pad(std::move(out), spec, false);
    }
    default: raise(ErrorKind::kUnsupported, "format conversion '{}' is not supported", spec.type);
  }
}

int parse_int(std::string_view text, size_t& i) {
  int n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') n = n * 10 + (text[i++] - '0');
  return n;
}

}  // namespace

std::string percent_format(std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  if (args.is_sequence_kind(SeqKind::kTuple)) {
    positional = args.as_list().items;
  } else {
    if (args.is_dict()) mapping = &args.as_dict();
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) raise(ErrorKind::kType, "incomplete format");
    const Value* value = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) raise(ErrorKind::kType, "incomplete format key");
      if (mapping == nullptr) raise(ErrorKind::kType, "format requires a mapping");
      value = mapping->find(format.substr(i + 1, close - i - 1));
      if (value == nullptr) raise(ErrorKind::kType, "KeyError: '{}'", format.substr(i + 1, close - i - 1));
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      const char c = format[i];
      if (c == '-')
        spec.align = '<';
      else if (c == '+' || (c == ' ' && spec.sign != '+'))
        spec.sign = c;
      else if (c == '#')
        spec.alternate = true;
      else if (c == '0')
        spec.zero = true;
      else
        break;
    }
    if (spec.align == '<') spec.zero = false;
    spec.printf = true;
    if (i < format.size() && format[i] == '*') raise(ErrorKind::kUnsupported, "'*' widths are not supported");
    if (i < format.size() && format[i] >= '1' && format[i] <= '9') spec.width = parse_int(format, i);
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = parse_int(format, i);
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) raise(ErrorKind::kType, "incomplete format");
    spec.type = format[i];
    if (spec.type == '%') {
      out += '%';
      continue;
    }
    if (value == nullptr) {
      if (next_arg >= positional.size()) raise(ErrorKind::kType, "not enough arguments for format string");
      value = &positional[next_arg++];
    }
    if (spec.type == 'a') spec.type = 'r';
    out += convert(*value, spec, std::string("%") + spec.type);
  }
  if (!used_mapping && mapping == nullptr && next_arg < positional.size()) {
    raise(ErrorKind::kType, "not all arguments converted during string formatting");
  }
  return out;
}

std::string brace_format(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}')
        ++i;
      else
        raise(ErrorKind::kType, "Single '}}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) raise(ErrorKind::kType, "Single '{{' encountered in format string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec_text;
    char conversion = 's';
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec_text = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
      field = field.substr(0, bang);
    }
    if (field.find_first_of(".[") != std::string_view::npos) {
      raise(ErrorKind::kUnsupported, "attribute and index lookups in str.format fields are not supported");
    }
    const Value* value = nullptr;
    if (field.empty() || (field[0] >= '0' && field[0] <= '9')) {
      size_t index = auto_index++;
      if (!field.empty()) {
        size_t p = 0;
        index = static_cast<size_t>(parse_int(field, p));
      }
      if (index >= args.positional.size()) raise(ErrorKind::kType, "Replacement index {} out of range", index);
      value = &args.positional[index];
    } else {
      for (const auto& [name, v] : args.keyword) {
        if (name == field) value = &v;
      }
      if (value == nullptr) raise(ErrorKind::kType, "KeyError: '{}'", field);
    }
    Spec spec;
    size_t p = 0;
    if (spec_text.size() >= 2 &&
        (spec_text[1] == '<' || spec_text[1] == '>' || spec_text[1] == '^' || spec_text[1] == '=')) {
      spec.fill = spec_text[0];
      spec.align = spec_text[1];
      p = 2;
    } else if (!spec_text.empty() &&
               (spec_text[0] == '<' || spec_text[0] == '>' || spec_text[0] == '^' || spec_text[0] == '=')) {
      spec.align = spec_text[0];
      p = 1;
    }
    if (p < spec_text.size() && (spec_text[p] == '+' || spec_text[p] == '-' || spec_text[p] == ' '))
      spec.sign = spec_text[p++];
    if (p < spec_text.size() && spec_text[p] == '#') {
      spec.alternate = true;
      ++p;
    }
    if (p < spec_text.size() && spec_text[p] == '0') {
      spec.zero = true;
      ++p;
    }
    if (p < spec_text.size() && spec_text[p] >= '1' && spec_text[p] <= '9') spec.width = parse_int(spec_text, p);
    if (p < spec_text.size() && spec_text[p] == '.') {
      ++p;
      spec.precision = parse_int(spec_text, p);
    }
    if (p < spec_text.size()) spec.type = spec_text[p++];
    if (p != spec_text.size()) raise(ErrorKind::kUnsupported, "format spec '{}' is not supported", spec_text);
    if (conversion == 'r' || conversion == 'a') {
      out += pad(value->repr(), spec, false);
    } else if (spec.type == 0 && value->is_number()) {
      out += pad(value->str(), spec, true);
    } else {
      out += convert(*value, spec, "format");
    }
  }
  return out;
}

}  // namespace imp::text::jinja
