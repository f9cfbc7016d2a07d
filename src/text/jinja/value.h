// The value model of the template engine: Python's objects as jinja2 sees them. Containers are
// immutable and shared (jinja2's ImmutableSandboxedEnvironment forbids mutating them), so copying a
// Value is a reference-count bump. The one mutable object is a namespace().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "text/jinja/error.h"

namespace imp::text::jinja {

class Value;
class Evaluator;

enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject, kCallable };

// What kind of Python iterable a list value stands for; it decides repr, len() and truthiness.
enum class SeqKind {
  kList,
  kTuple,
  kIterator,  // a generator or iterator (filters like map/select): always truthy, has no len()
  kView,      // dict_items / dict_keys / dict_values: sized, not subscriptable
  kRange,     // range(...): sized, subscriptable, repr "range(a, b)"
};

struct UndefinedData {
  std::string message;  // what jinja2's UndefinedError would say when the value is used
  ErrorKind kind = ErrorKind::kUndefined;
};

struct StringData {
  std::string text;
  bool markup = false;  // a markupsafe.Markup (from |safe or |escape)
};

struct ListData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  std::string label;  // the type shown by repr for iterators and views, range's repr
  // How many items of an iterator were already taken: like Python's, a generator is used up by
  // iterating it (a second loop over the same generator sees nothing).
  mutable size_t consumed = 0;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, keys unique under Python equality
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place or appends
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Native objects with attributes: loop, namespace, cycler, joiner.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual Value get_attr(const std::string& name) const = 0;
  virtual void set_attr(const std::string& name, Value value);
  virtual std::string repr() const;
  virtual Value call(Evaluator& evaluator, CallArgs& args);  // default: not callable
  virtual bool is_callable() const { return false; }
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string name() const = 0;
  virtual Value call(Evaluator& evaluator, CallArgs& args) = 0;
  virtual std::string repr() const;
};

class Value {
 public:
  Value() : data_(std::make_shared<const UndefinedData>()) {}
  Value(std::nullptr_t) : data_(std::monostate{}) {}
  Value(bool b) : data_(b) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : data_(i) {}
  Value(double f) : data_(f) {}
  Value(std::string s, bool markup = false)
      : data_(std::make_shared<const StringData>(StringData{std::move(s), markup})) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}

  static Value undefined(std::string message, ErrorKind kind = ErrorKind::kUndefined);
  static Value none() { return Value(nullptr); }
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::kList, std::string label = {});
  static Value tuple(std::vector<Value> items) { return list(std::move(items), SeqKind::kTuple); }
  static Value dict(DictData dict);
  static Value object(std::shared_ptr<Object> object);
  static Value callable(std::shared_ptr<Callable> callable);

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_object() const { return type() == Type::kObject; }
  bool is_callable() const { return type() == Type::kCallable; }
  // Python's int includes bool; number includes both and float.
  bool is_integral() const { return is_int() || is_bool(); }
  bool is_number() const { return is_integral() || is_float(); }
  bool is_sequence_kind(SeqKind kind) const { return is_list() && as_list().kind == kind; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }
  double as_float() const { return is_float() ? std::get<double>(data_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return std::get<std::shared_ptr<const StringData>>(data_)->text; }
  bool is_markup() const { return is_string() && std::get<std::shared_ptr<const StringData>>(data_)->markup; }
  const ListData& as_list() const { return *std::get<std::shared_ptr<const ListData>>(data_); }
  const DictData& as_dict() const { return *std::get<std::shared_ptr<const DictData>>(data_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const std::shared_ptr<Object>& object_ptr() const { return std::get<std::shared_ptr<Object>>(data_); }
  const std::shared_ptr<Callable>& callable_ptr() const { return std::get<std::shared_ptr<Callable>>(data_); }
  const UndefinedData& undefined_data() const { return *std::get<std::shared_ptr<const UndefinedData>>(data_); }

  // Raises the error jinja2's Undefined raises when it is used (called, indexed, added to, ...).
  [[noreturn]] void fail_undefined() const;

  bool truthy() const;                         // Python bool()
  std::string str() const;                     // Python str(): what {{ value }} prints
  std::string repr() const;                    // Python repr(): how values print inside containers
  std::string type_name() const;               // Python's type(value).__name__
  bool same_object(const Value& other) const;  // Python `is`

 private:
  using Data = std::variant<std::shared_ptr<const UndefinedData>, std::monostate, bool, int64_t, double,
                            std::shared_ptr<const StringData>, std::shared_ptr<const ListData>,
                            std::shared_ptr<const DictData>, std::shared_ptr<Object>, std::shared_ptr<Callable>>;
  Data data_;
};

// Python semantics shared by the evaluator, filters, tests and methods.
bool py_equal(const Value& a, const Value& b);
bool py_less(const Value& a, const Value& b);    // raises TypeError for unorderable operands
std::string format_float(double value);          // Python repr(float)
std::string repr_string(std::string_view text);  // Python repr(str)
int64_t py_len(const Value& value);              // raises TypeError when there is no len()
// The items a for loop or list() sees: characters, keys, elements; undefined iterates as empty.
// Iterating an iterator (generator) uses it up.
std::vector<Value> iterate(const Value& value);
// The next item of an iterator (generator), taking it; nullopt when it is exhausted.
std::optional<Value> next_item(const Value& iterator);
// Python str() of a value that a filter converts with soft_str (undefined becomes '').
inline std::string to_str(const Value& value) { return value.str(); }

}  // namespace imp::text::jinja
