#include "text/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "text/jinja/unicode.h"

namespace imp::text::jinja {

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

void Object::set_attr(const std::string& name, Value value) {
  raise(ErrorKind::kType, "cannot assign attribute on non-namespace object");
}

std::string Object::repr() const { return fmt::format("<{} object>", type_name()); }

Value Object::call(Evaluator& evaluator, CallArgs& args) {
  raise(ErrorKind::kType, "'{}' object is not callable", type_name());
}

std::string Callable::repr() const { return fmt::format("<function {}>", name()); }

Value Value::undefined(std::string message, ErrorKind kind) {
  Value value;
  value.data_ = std::make_shared<const UndefinedData>(UndefinedData{std::move(message), kind});
  return value;
}

Value Value::list(std::vector<Value> items, SeqKind kind, std::string label) {
  Value value;
  value.data_ = std::make_shared<const ListData>(ListData{std::move(items), kind, std::move(label)});
  return value;
}

Value Value::dict(DictData dict) {
  Value value;
  value.data_ = std::make_shared<const DictData>(std::move(dict));
  return value;
}

Value Value::object(std::shared_ptr<Object> object) {
  Value value;
  value.data_ = std::move(object);
  return value;
}

Value Value::callable(std::shared_ptr<Callable> callable) {
  Value value;
  value.data_ = std::move(callable);
  return value;
}

void Value::fail_undefined() const {
  const UndefinedData& data = undefined_data();
  throw TemplateError(data.kind, data.message.empty() ? "value is undefined" : data.message);
}

bool Value::truthy() const {
  switch (type()) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return as_bool();
    case Type::kInt: return as_int() != 0;
    case Type::kFloat: return as_float() != 0.0;
    case Type::kString: return !as_string().empty();
    case Type::kList: return as_list().kind == SeqKind::kIterator || !as_list().items.empty();
    case Type::kDict: return !as_dict().items.empty();
    case Type::kObject:
    case Type::kCallable: return true;
  }
  return false;
}

std::string Value::str() const {
  switch (type()) {
    case Type::kUndefined: return "";
    case Type::kString: return as_string();
    default: return is_markup() ? as_string() : repr();
  }
}

std::string Value::repr() const {
  switch (type()) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "None";
    case Type::kBool: return as_bool() ? "True" : "False";
    case Type::kInt: return std::to_string(as_int());
    case Type::kFloat: return format_float(as_float());
    case Type::kString: return is_markup() ? "Markup(" + repr_string(as_string()) + ")" : repr_string(as_string());
    case Type::kList: {
      const ListData& list = as_list();
      if (list.kind == SeqKind::kIterator) return fmt::format("<{} object>", list.label);
      if (list.kind == SeqKind::kRange) return list.label;
      std::string out = list.kind == SeqKind::kTuple ? "(" : "[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += list.items[i].repr();
      }
      if (list.kind == SeqKind::kTuple) return out + (list.items.size() == 1 ? ",)" : ")");
      if (list.kind == SeqKind::kView) return list.label + "(" + out + "])";
      return out + "]";
    }
    case Type::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Type::kObject: return as_object().repr();
    case Type::kCallable: return callable_ptr()->repr();
  }
  return "";
}

std::string Value::type_name() const {
  switch (type()) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return is_markup() ? "Markup" : "str";
    case Type::kList:
      switch (as_list().kind) {
        case SeqKind::kList: return "list";
        case SeqKind::kTuple: return "tuple";
        case SeqKind::kRange: return "range";
        default: return as_list().label;
      }
    case Type::kDict: return "dict";
    case Type::kObject: return as_object().type_name();
    case Type::kCallable: return "function";
  }
  return "object";
}

bool Value::same_object(const Value& other) const {
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::kUndefined: return data_ == other.data_;
    case Type::kNone: return true;
    case Type::kBool: return as_bool() == other.as_bool();
    // CPython caches small ints; larger ones are only identical when they are the same object,
    // which templates cannot observe reliably, so equal values count as the same.
    case Type::kInt: return as_int() == other.as_int();
    case Type::kFloat: return false;
    default: return data_ == other.data_;
  }
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::kUndefined:
    case Type::kNone: return true;
    case Type::kString: return a.as_string() == b.as_string();
    case Type::kList: {
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      if (x.kind == SeqKind::kIterator || y.kind == SeqKind::kIterator) return &x == &y;
      const bool x_tuple = x.kind == SeqKind::kTuple;
      if (x_tuple != (y.kind == SeqKind::kTuple) || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!py_equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Type::kDict: {
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (other == nullptr || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order is code point order
  if (a.is_list() && b.is_list()) {
    const ListData& x = a.as_list();
    const ListData& y = b.as_list();
    const bool comparable = (x.kind == SeqKind::kList && y.kind == SeqKind::kList) ||
                            (x.kind == SeqKind::kTuple && y.kind == SeqKind::kTuple);
    if (comparable) {
      for (size_t i = 0; i < x.items.size() && i < y.items.size(); ++i) {
        if (!py_equal(x.items[i], y.items[i])) return py_less(x.items[i], y.items[i]);
      }
      return x.items.size() < y.items.size();
    }
  }
  raise(ErrorKind::kType, "'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  // Shortest round-trip digits d.ddde±XX; Python switches to exponent form outside 1e-4 <= |x| < 1e16.
  const bool negative = text.front() == '-';
  const size_t e_pos = text.find('e');
  std::string digits;
  for (char c : text.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(text.substr(e_pos + 1)));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  return out;
}

std::string repr_string(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : unicode::decode(text)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x7F || unicode::is_printable(cp)) {
      unicode::append(out, cp);
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  out += quote;
  return out;
}

int64_t py_len(const Value& value) {
  switch (value.type()) {
    case Type::kUndefined: return 0;
    case Type::kString: return static_cast<int64_t>(unicode::length(value.as_string()));
    case Type::kList:
      if (value.as_list().kind != SeqKind::kIterator) return static_cast<int64_t>(value.as_list().items.size());
      break;
    case Type::kDict: return static_cast<int64_t>(value.as_dict().items.size());
    default: break;
  }
  raise(ErrorKind::kType, "object of type '{}' has no len()", value.type_name());
}

std::vector<Value> iterate(const Value& value) {
  switch (value.type()) {
    case Type::kUndefined: return {};
    case Type::kString: {
      std::vector<Value> chars;
      for (char32_t cp : unicode::decode(value.as_string())) {
        std::string c;
        unicode::append(c, cp);
        chars.emplace_back(std::move(c));
      }
      return chars;
    }
    case Type::kList: {
      const ListData& list = value.as_list();
      if (list.kind != SeqKind::kIterator) return list.items;
      std::vector<Value> rest(list.items.begin() + static_cast<long>(list.consumed), list.items.end());
      list.consumed = list.items.size();
      return rest;
    }
    case Type::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.as_dict().items.size());
      for (const auto& [k, v] : value.as_dict().items) keys.push_back(k);
      return keys;
    }
    default: break;
  }
  raise(ErrorKind::kType, "'{}' object is not iterable", value.type_name());
}

std::optional<Value> next_item(const Value& iterator) {
  const ListData& list = iterator.as_list();
  if (list.consumed >= list.items.size()) return std::nullopt;
  return list.items[list.consumed++];
}

}  // namespace imp::text::jinja
