// Attribute and item access as jinja2's ImmutableSandboxedEnvironment does it, and the Python
// methods of str, list, tuple and dict that templates call.
#include <algorithm>
#include <set>

#include "text/jinja/args.h"
#include "text/jinja/builtins.h"
#include "text/jinja/format.h"
#include "text/jinja/strings.h"
#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

using Names = std::set<std::string_view>;

// Every attribute CPython has on these types (so `d.items` is the method even when d has an "items" key).
const Names kStrAttributes = {
    "capitalize",   "casefold",   "center",    "count",       "encode",    "endswith",     "expandtabs",   "find",
    "format",       "format_map", "index",     "isalnum",     "isalpha",   "isascii",      "isdecimal",    "isdigit",
    "isidentifier", "islower",    "isnumeric", "isprintable", "isspace",   "istitle",      "isupper",      "join",
    "ljust",        "lower",      "lstrip",    "maketrans",   "partition", "removeprefix", "removesuffix", "replace",
    "rfind",        "rindex",     "rjust",     "rpartition",  "rsplit",    "rstrip",       "split",        "splitlines",
    "startswith",   "strip",      "swapcase",  "title",       "translate", "upper",        "zfill"};
const Names kListAttributes = {"append", "clear", "copy",   "count",   "extend", "index",
                               "insert", "pop",   "remove", "reverse", "sort"};
const Names kTupleAttributes = {"count", "index"};
const Names kDictAttributes = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                               "pop",   "popitem", "setdefault", "update", "values"};
const Names kIntAttributes = {"as_integer_ratio", "bit_count",  "bit_length", "conjugate",
                              "denominator",      "from_bytes", "imag",       "is_integer",
                              "numerator",        "real",       "to_bytes"};
const Names kFloatAttributes = {"as_integer_ratio", "conjugate", "fromhex", "hex", "imag", "is_integer", "real"};
// What the immutable sandbox refuses: methods that modify a list or dict in place.
const Names kListMutators = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
const Names kDictMutators = {"clear", "pop", "popitem", "setdefault", "update"};

const Names* attributes_of(const Value& object) {
  switch (object.type()) {
    case Type::kString: return &kStrAttributes;
    case Type::kDict: return &kDictAttributes;
    case Type::kBool:
    case Type::kInt: return &kIntAttributes;
    case Type::kFloat: return &kFloatAttributes;
    case Type::kList:
      switch (object.as_list().kind) {
        case SeqKind::kList: return &kListAttributes;
        case SeqKind::kTuple: return &kTupleAttributes;
        default: return nullptr;
      }
    default: return nullptr;
  }
}

class BoundMethod : public Callable {
 public:
  BoundMethod(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Value call(Evaluator&, CallArgs& args) override { return call_method(receiver_, name_, args); }
  std::string repr() const override {
    return fmt::format("<built-in method {} of {} object>", name_, receiver_.type_name());
  }

 private:
  Value receiver_;
  std::string name_;
};

// jinja2's object_type_repr, used in its undefined messages.
std::string object_type(const Value& object) {
  if (object.is_none()) return "None";
  return object.type_name() + " object";
}

Value no_attribute(const Value& object, const std::string& name) {
  return Value::undefined(fmt::format("{} has no attribute {}", repr_string(object_type(object)), repr_string(name)));
}

Value python_attribute(const Value& object, const std::string& name) {
  const bool list_mutator = object.is_sequence_kind(SeqKind::kList) && kListMutators.contains(name);
  if (list_mutator || (object.is_dict() && kDictMutators.contains(name))) {
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, object.type_name()),
                            ErrorKind::kSecurity);
  }
  if (object.is_number() && (name == "real" || name == "imag" || name == "numerator" || name == "denominator")) {
    raise(ErrorKind::kUnsupported, "attribute '{}' of {} is not supported", name, object.type_name());
  }
  return Value::callable(std::make_shared<BoundMethod>(object, name));
}

std::optional<std::string> optional_string(const Value& value, std::string_view what) {
  if (value.is_none()) return std::nullopt;
  if (!value.is_string()) raise(ErrorKind::kType, "{} must be str or None, not {}", what, value.type_name());
  return value.as_string();
}

std::optional<int64_t> optional_index(const Value& value) {
  if (value.is_none()) return std::nullopt;
  if (!value.is_integral()) raise(ErrorKind::kType, "slice indices must be integers or None");
  return value.as_int();
}

int64_t int_arg(const Value& value, std::string_view what) {
  if (!value.is_integral())
    raise(ErrorKind::kType, "'{}' object cannot be interpreted as an integer ({})", value.type_name(), what);
  return value.as_int();
}

const std::string& str_arg(const Value& value, std::string_view method) {
  if (!value.is_string()) raise(ErrorKind::kType, "{}() argument must be str, not {}", method, value.type_name());
  return value.as_string();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.emplace_back(std::move(part));
  return Value::list(std::move(items));
}

char32_t fill_char(const Value& value) {
  const std::u32string fill = unicode::decode(str_arg(value, "fill character"));
  if (fill.size() != 1) raise(ErrorKind::kType, "The fill character must be exactly one character long");
  return fill[0];
}

Value str_method(const std::string& text, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "startswith" || name == "endswith") {
    const auto a = bind_args(fn, args, {{"prefix"}, {"start", Value::none()}, {"end", Value::none()}});
    std::vector<Value> prefixes =
        a[0].is_sequence_kind(SeqKind::kTuple) ? a[0].as_list().items : std::vector<Value>{a[0]};
    for (const Value& prefix : prefixes) {
      if (!prefix.is_string()) {
        raise(ErrorKind::kType, "{} first arg must be str or a tuple of str, not {}", name, prefix.type_name());
      }
      if (strings::starts_with(text, prefix.as_string(), optional_index(a[1]), optional_index(a[2]),
                               name == "endswith")) {
        return Value(true);
      }
    }
    return Value(false);
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind_args(fn, args, {{"sep", Value::none()}, {"maxsplit", Value(-1)}});
    const auto sep = optional_string(a[0], "sep");
    const int64_t maxsplit = int_arg(a[1], "maxsplit");
    return string_list(name == "split" ? strings::split(text, sep, maxsplit) : strings::rsplit(text, sep, maxsplit));
  }
  if (name == "splitlines") {
    const auto a = bind_args(fn, args, {{"keepends", Value(false)}});
    return string_list(strings::splitlines(text, a[0].truthy()));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind_args(fn, args, {{"chars", Value::none()}});
    const strings::Side side = name == "strip"    ? strings::Side::kBoth
                               : name == "lstrip" ? strings::Side::kLeft
                                                  : strings::Side::kRight;
    return Value(strings::strip(text, optional_string(a[0], "strip arg"), side));
  }
  if (name == "lower" || name == "casefold") {
    expect_no_args(fn, args);
    return Value(unicode::lower(text));
  }
  if (name == "upper") {
    expect_no_args(fn, args);
    return Value(unicode::upper(text));
  }
  if (name == "title" || name == "capitalize" || name == "swapcase") {
    expect_no_args(fn, args);
    return Value(name == "title"        ? strings::title(text)
                 : name == "capitalize" ? strings::capitalize(text)
                                        : strings::swapcase(text));
  }
  if (name == "replace") {
    const auto a = bind_args(fn, args, {{"old"}, {"new"}, {"count", Value(-1)}});
    return Value(strings::replace(text, str_arg(a[0], name), str_arg(a[1], name), int_arg(a[2], "count")));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const auto a = bind_args(fn, args, {{"sub"}, {"start", Value::none()}, {"end", Value::none()}});
    const std::string& sub = str_arg(a[0], name);
    if (name == "count") return Value(strings::count(text, sub, optional_index(a[1]), optional_index(a[2])));
    const int64_t found = strings::find(text, sub, optional_index(a[1]), optional_index(a[2]), name[0] == 'r');
    if (found < 0 && name.ends_with("index")) raise(ErrorKind::kType, "substring not found");
    return Value(found);
  }
  if (name == "join") {
    const auto a = bind_args(fn, args, {{"iterable"}});
    std::string out;
    size_t i = 0;
    for (const Value& item : iterate(a[0])) {
      if (!item.is_string()) {
        raise(ErrorKind::kType, "sequence item {}: expected str instance, {} found", i, item.type_name());
      }
      if (i++ > 0) out += text;
      out += item.as_string();
    }
    return Value(std::move(out));
  }
  if (name == "isalnum" || name == "isalpha" || name == "isdigit" || name == "isdecimal" || name == "isnumeric" ||
      name == "isspace" || name == "isascii") {
    expect_no_args(fn, args);
    if (name == "isascii") return Value(std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; }));
    bool (*predicate)(char32_t) = name == "isalnum"     ? unicode::is_alnum
                                  : name == "isalpha"   ? unicode::is_alpha
                                  : name == "isdigit"   ? unicode::is_digit
                                  : name == "isdecimal" ? unicode::is_decimal
                                  : name == "isnumeric" ? unicode::is_numeric
                                                        : unicode::is_space;
    return Value(strings::all_chars(text, predicate));
  }
  if (name == "islower" || name == "isupper" || name == "istitle") {
    expect_no_args(fn, args);
    return Value(name == "islower"   ? strings::is_lower(text)
                 : name == "isupper" ? strings::is_upper(text)
                                     : strings::is_title(text));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const auto a = bind_args(fn, args, {{"width"}, {"fillchar", Value(" ")}});
    const char align = name == "center" ? '^' : name == "ljust" ? '<' : '>';
    return Value(strings::pad(text, int_arg(a[0], "width"), fill_char(a[1]), align));
  }
  if (name == "zfill") {
    const auto a = bind_args(fn, args, {{"width"}});
    return Value(strings::zfill(text, int_arg(a[0], "width")));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind_args(fn, args, {{"affix"}});
    const std::string& affix = str_arg(a[0], name);
    if (name == "removeprefix") return Value(text.starts_with(affix) ? text.substr(affix.size()) : text);
    return Value(text.ends_with(affix) ? text.substr(0, text.size() - affix.size()) : text);
  }
  if (name == "partition" || name == "rpartition") {
    const auto a = bind_args(fn, args, {{"sep"}});
    const std::string& sep = str_arg(a[0], name);
    if (sep.empty()) raise(ErrorKind::kType, "empty separator");
    const size_t at = name == "partition" ? text.find(sep) : text.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? Value::tuple({Value(text), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(text)});
    }
    return Value::tuple({Value(text.substr(0, at)), Value(sep), Value(text.substr(at + sep.size()))});
  }
  if (name == "format") return Value(brace_format(text, args));
  raise(ErrorKind::kUnsupported, "str.{}() is not supported", name);
}

Value sequence_method(const Value& receiver, const std::string& name, CallArgs& args) {
  const std::vector<Value>& items = receiver.as_list().items;
  const std::string fn = receiver.type_name() + "." + name;
  if (name == "count") {
    const auto a = bind_args(fn, args, {{"value"}});
    return Value(static_cast<int64_t>(
        std::count_if(items.begin(), items.end(), [&](const Value& v) { return py_equal(v, a[0]); })));
  }
  if (name == "index") {
    const auto a = bind_args(fn, args, {{"value"}, {"start", Value(0)}, {"stop", Value(INT64_MAX)}});
    const int64_t n = static_cast<int64_t>(items.size());
    auto fix = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    for (int64_t i = fix(int_arg(a[1], "start")); i < fix(int_arg(a[2], "stop")); ++i) {
      if (py_equal(items[static_cast<size_t>(i)], a[0])) return Value(i);
    }
    raise(ErrorKind::kType, "{} is not in {}", a[0].repr(), receiver.type_name());
  }
  if (name == "copy") {
    expect_no_args(fn, args);
    return Value::list(items);
  }
  raise(ErrorKind::kUnsupported, "{}() is not supported", fn);
}

Value dict_method(const DictData& dict, const std::string& name, CallArgs& args) {
  const std::string fn = "dict." + name;
  if (name == "get") {
    const auto a = bind_args(fn, args, {{"key"}, {"default", Value::none()}});
    const Value* found = dict.find(a[0]);
    return found != nullptr ? *found : a[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    expect_no_args(fn, args);
    std::vector<Value> out;
    out.reserve(dict.items.size());
    for (const auto& [k, v] : dict.items) {
      out.push_back(name == "items" ? Value::tuple({k, v}) : name == "keys" ? k : v);
    }
    return Value::list(std::move(out), SeqKind::kView, "dict_" + name);
  }
  if (name == "copy") {
    expect_no_args(fn, args);
    return Value::dict(dict);
  }
  raise(ErrorKind::kUnsupported, "{}() is not supported", fn);
}

}  // namespace

Value call_method(const Value& receiver, const std::string& name, CallArgs& args) {
  switch (receiver.type()) {
    case Type::kString: return str_method(receiver.as_string(), name, args);
    case Type::kList: return sequence_method(receiver, name, args);
    case Type::kDict: return dict_method(receiver.as_dict(), name, args);
    default: raise(ErrorKind::kUnsupported, "{}.{}() is not supported", receiver.type_name(), name);
  }
}

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) object.fail_undefined();
  if (object.is_object()) return object.as_object().get_attr(name);
  const Names* attributes = attributes_of(object);
  if (attributes != nullptr && attributes->contains(name)) return python_attribute(object, name);
  if (object.is_dict()) {
    if (const Value* value = object.as_dict().find(std::string_view(name))) return *value;
  }
  return no_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) object.fail_undefined();
  switch (object.type()) {
    case Type::kDict:
      if (const Value* value = object.as_dict().find(key)) return *value;
      break;
    case Type::kString:
    case Type::kList: {
      const bool indexable = object.is_string() || object.as_list().kind == SeqKind::kList ||
                             object.as_list().kind == SeqKind::kTuple || object.as_list().kind == SeqKind::kRange;
      if (!indexable || !key.is_integral()) break;
      int64_t index = key.as_int();
      if (object.is_string()) {
        const std::u32string chars = unicode::decode(object.as_string());
        const int64_t n = static_cast<int64_t>(chars.size());
        if (index < 0) index += n;
        if (index < 0 || index >= n) break;
        std::string out;
        unicode::append(out, chars[static_cast<size_t>(index)]);
        return Value(std::move(out));
      }
      const auto& items = object.as_list().items;
      const int64_t n = static_cast<int64_t>(items.size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) break;
      return items[static_cast<size_t>(index)];
    }
    default: break;
  }
  if (key.is_string()) {
    if (object.is_object()) return object.as_object().get_attr(key.as_string());
    const Names* attributes = attributes_of(object);
    if (attributes != nullptr && attributes->contains(key.as_string()))
      return python_attribute(object, key.as_string());
    return no_attribute(object, key.as_string());
  }
  return Value::undefined(fmt::format("{} has no element {}", object_type(object), key.repr()));
}

}  // namespace imp::text::jinja
