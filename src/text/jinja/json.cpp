#include "text/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

// Deeper JSON is refused rather than risking the stack (Python's json gives up near 1000 too).
constexpr int kMaxDepth = 512;

template <typename Json>
Value convert(const Json& json, int depth = 0) {
  if (depth > kMaxDepth) raise(ErrorKind::kType, "JSON value is nested more than {} levels deep", kMaxDepth);
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t value = json.template get<uint64_t>();
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        raise(ErrorKind::kUnsupported, "integer {} does not fit in 64 bits", value);
      }
      return Value(static_cast<int64_t>(value));
    }
    case nlohmann::json::value_t::number_float: return Value(json.template get<double>());
    case nlohmann::json::value_t::string: return Value(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictData dict;
      dict.items.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it)
        dict.items.emplace_back(Value(it.key()), convert(it.value(), depth + 1));
      return Value::dict(std::move(dict));
    }
    default: raise(ErrorKind::kType, "unsupported JSON value (binary data)");
  }
}

void write_string(std::string& out, std::string_view text, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : unicode::decode(text)) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp > 0xFFFF) {
        const char32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      }
    } else {
      unicode::append(out, cp);
    }
  }
  out += '"';
}

std::string float_json(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  return format_float(value);
}

// A dict key as json.dumps writes it: strings as they are, scalars converted, others refused.
std::string key_text(const Value& key) {
  switch (key.type()) {
    case Type::kString: return key.as_string();
    case Type::kBool: return key.as_bool() ? "true" : "false";
    case Type::kInt: return std::to_string(key.as_int());
    case Type::kFloat: return float_json(key.as_float());
    case Type::kNone: return "null";
    default: raise(ErrorKind::kType, "keys must be str, int, float, bool or None, not {}", key.type_name());
  }
}

class Writer {
 public:
  explicit Writer(const JsonOptions& options) : options_(options) {}

  void write(std::string& out, const Value& value, int depth) {
    if (depth > kMaxDepth) raise(ErrorKind::kType, "value is nested too deeply for JSON");
    switch (value.type()) {
      case Type::kNone: out += "null"; return;
      case Type::kBool: out += value.as_bool() ? "true" : "false"; return;
      case Type::kInt: out += std::to_string(value.as_int()); return;
      case Type::kFloat: out += float_json(value.as_float()); return;
      case Type::kString: write_string(out, value.as_string(), options_.ensure_ascii); return;
      case Type::kList: {
        const ListData& list = value.as_list();
        if (list.kind != SeqKind::kList && list.kind != SeqKind::kTuple) break;
        if (list.items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < list.items.size(); ++i) {
          if (i > 0) out += options_.item_separator;
          newline(out, depth + 1);
          write(out, list.items[i], depth + 1);
        }
        newline(out, depth);
        out += ']';
        return;
      }
      case Type::kDict: {
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& item : value.as_dict().items) items.push_back(&item);
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (options_.sort_keys) {
          std::stable_sort(items.begin(), items.end(),
                           [](const auto* a, const auto* b) { return py_less(a->first, b->first); });
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += options_.item_separator;
          newline(out, depth + 1);
          write_string(out, key_text(items[i]->first), options_.ensure_ascii);
          out += options_.key_separator;
          write(out, items[i]->second, depth + 1);
        }
        newline(out, depth);
        out += '}';
        return;
      }
      default: break;
    }
    raise(ErrorKind::kType, "Object of type {} is not JSON serializable", value.type_name());
  }

 private:
  void newline(std::string& out, int depth) const {
    if (!options_.indent) return;
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *options_.indent;
  }

  const JsonOptions& options_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) { return convert(json); }
Value from_json(const nlohmann::json& json) { return convert(json); }

std::string to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  Writer(options).write(out, value, 0);
  return out;
}

}  // namespace imp::text::jinja
