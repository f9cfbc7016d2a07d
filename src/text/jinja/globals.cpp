// The global functions of Hugging Face's chat template environment: jinja2's range, dict, namespace,
// cycler and joiner, plus HF's raise_exception and strftime_now. dict() and namespace() follow HF's
// TemplateDict and TemplateNamespace (no underscore-prefixed namespace attributes).
#include <ctime>
#include <functional>

#include "text/jinja/args.h"
#include "text/jinja/builtins.h"

namespace imp::text::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2 sandbox's MAX_RANGE

class Function : public Callable {
 public:
  using Fn = std::function<Value(CallArgs&)>;
  Function(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Value call(Evaluator&, CallArgs& args) override { return fn_(args); }

 private:
  std::string name_;
  Fn fn_;
};

void check_namespace_name(const std::string& name) {
  if (!name.empty() && name[0] == '_') {
    raise(ErrorKind::kSecurity,
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'. Please rename the "
          "attribute.",
          name);
  }
}

class Namespace : public Object {
 public:
  explicit Namespace(DictData attrs) : attrs_(std::move(attrs)) {
    for (const auto& [k, v] : attrs_.items) {
      if (k.is_string()) check_namespace_name(k.as_string());
    }
  }
  std::string type_name() const override { return "Namespace"; }
  Value get_attr(const std::string& name) const override {
    if (const Value* value = attrs_.find(std::string_view(name))) return *value;
    return Value::undefined(fmt::format("'Namespace object' has no attribute '{}'", name));
  }
  void set_attr(const std::string& name, Value value) override {
    check_namespace_name(name);
    attrs_.set(Value(name), std::move(value));
  }
  std::string repr() const override { return "<Namespace " + Value::dict(attrs_).repr() + ">"; }

 private:
  DictData attrs_;
};

class Cycler : public Object {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {
    if (items_.empty()) raise(ErrorKind::kType, "at least one item has to be provided");
  }
  std::string type_name() const override { return "Cycler"; }
  Value get_attr(const std::string& name) const override {
    if (name == "current") return items_[*position_];
    auto position = position_;
    auto items = items_;
    if (name == "next") {
      return Value::callable(std::make_shared<Function>("next", [position, items](CallArgs&) {
        const Value item = items[*position];
        *position = (*position + 1) % items.size();
        return item;
      }));
    }
    if (name == "reset") {
      return Value::callable(std::make_shared<Function>("reset", [position](CallArgs&) {
        *position = 0;
        return Value::none();
      }));
    }
    return Value::undefined(fmt::format("'Cycler object' has no attribute '{}'", name));
  }

 private:
  std::vector<Value> items_;
  std::shared_ptr<size_t> position_ = std::make_shared<size_t>(0);
};

// dict(mapping_or_pairs, **kwargs) as Python builds it.
DictData build_dict(const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1)
    raise(ErrorKind::kType, "{} expected at most 1 argument, got {}", function, args.positional.size());
  DictData dict;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      dict = source.as_dict();
    } else {
      for (const Value& pair : iterate(source)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2)
          raise(ErrorKind::kType, "dictionary update sequence element has length {}; 2 is required", kv.size());
        dict.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) dict.set(Value(k), v);
  return dict;
}

Value range(CallArgs& args) {
  if (!args.keyword.empty()) raise(ErrorKind::kType, "range() takes no keyword arguments");
  const size_t n = args.positional.size();
  if (n < 1 || n > 3) raise(ErrorKind::kType, "range expected 1 to 3 arguments, got {}", n);
  for (const Value& v : args.positional) {
    if (!v.is_integral()) raise(ErrorKind::kType, "'{}' object cannot be interpreted as an integer", v.type_name());
  }
  const int64_t start = n == 1 ? 0 : args.positional[0].as_int();
  const int64_t stop = n == 1 ? args.positional[0].as_int() : args.positional[1].as_int();
  const int64_t step = n == 3 ? args.positional[2].as_int() : 1;
  if (step == 0) raise(ErrorKind::kType, "range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      raise(ErrorKind::kSecurity, "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
    }
    items.emplace_back(i);
  }
  const std::string label =
      n == 3 ? fmt::format("range({}, {}, {})", start, stop, step) : fmt::format("range({}, {})", start, stop);
  return Value::list(std::move(items), SeqKind::kRange, label);
}

Value strftime_now(CallArgs& args) {
  const auto a = bind_args("strftime_now", args, {{"format"}});
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::string format = a[0].str();
  if (format.empty()) return Value("");
  std::vector<char> buffer(256 + format.size() * 16);
  const size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
  return Value(std::string(buffer.data(), n));
}

}  // namespace

void add_globals(DictData& globals) {
  auto add = [&globals](const std::string& name, Function::Fn fn) {
    globals.set(Value(name), Value::callable(std::make_shared<Function>(name, std::move(fn))));
  };
  add("range", range);
  add("dict", [](CallArgs& args) { return Value::dict(build_dict(args, "dict")); });
  add("namespace",
      [](CallArgs& args) { return Value::object(std::make_shared<Namespace>(build_dict(args, "namespace"))); });
  add("raise_exception", [](CallArgs& args) -> Value {
    const auto a = bind_args("raise_exception", args, {{"message"}});
    throw TemplateError(ErrorKind::kRaised, a[0].str());
  });
  add("strftime_now", strftime_now);
  add("cycler", [](CallArgs& args) { return Value::object(std::make_shared<Cycler>(args.positional)); });
  add("joiner", [](CallArgs& args) {
    const auto a = bind_args("joiner", args, {{"sep", Value(", ")}});
    auto used = std::make_shared<bool>(false);
    const Value sep = a[0];
    return Value::callable(std::make_shared<Function>("joiner", [used, sep](CallArgs&) {
      if (!*used) {
        *used = true;
        return Value("");
      }
      return sep;
    }));
  });
  add("lipsum", [](CallArgs&) -> Value { raise(ErrorKind::kUnsupported, "lipsum() is not supported"); });
}

}  // namespace imp::text::jinja
