// The tests of `value is name(args)`, with jinja2's definitions (bool counts as a number but not as an
// integer; undefined is iterable and a sequence; every callable object, undefined included, is callable).
#include <set>
#include <unordered_map>

#include "text/jinja/args.h"
#include "text/jinja/builtins.h"
#include "text/jinja/operators.h"
#include "text/jinja/strings.h"

namespace imp::text::jinja {
namespace {

const Value& one_arg(std::string_view name, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keyword.empty())
    raise(ErrorKind::kType, "test '{}' takes one argument", name);
  return args.positional[0];
}

template <bool (*Predicate)(const Value&)>
bool plain(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("test", args);
  return Predicate(value);
}

bool is_defined(const Value& v) { return !v.is_undefined(); }
bool is_undefined(const Value& v) { return v.is_undefined(); }
bool is_none(const Value& v) { return v.is_none(); }
bool is_boolean(const Value& v) { return v.is_bool(); }
bool is_false(const Value& v) { return v.is_bool() && !v.as_bool(); }
bool is_true(const Value& v) { return v.is_bool() && v.as_bool(); }
bool is_integer(const Value& v) { return v.is_int(); }
bool is_float(const Value& v) { return v.is_float(); }
bool is_number(const Value& v) { return v.is_number(); }
bool is_string(const Value& v) { return v.is_string(); }
bool is_mapping(const Value& v) { return v.is_dict(); }
bool is_escaped(const Value& v) { return v.is_markup(); }
bool is_lower(const Value& v) { return strings::is_lower(v.str()); }
bool is_upper(const Value& v) { return strings::is_upper(v.str()); }
bool is_iterable(const Value& v) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }
bool is_sequence(const Value& v) {
  if (v.is_undefined() || v.is_string() || v.is_dict()) return true;
  return v.is_list() && v.as_list().kind != SeqKind::kIterator && v.as_list().kind != SeqKind::kView;
}
bool is_callable(const Value& v) {
  return v.is_callable() || v.is_undefined() || (v.is_object() && v.as_object().is_callable());
}
bool is_filter_name(const Value& v) { return v.is_string() && find_filter(v.as_string()) != nullptr; }
bool is_test_name(const Value& v) { return v.is_string() && find_test(v.as_string()) != nullptr; }

bool test_odd(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("odd", args);
  return py_equal(binary_op("%", value, Value(2)), Value(1));
}

bool test_even(Evaluator&, const Value& value, CallArgs& args) {
  expect_no_args("even", args);
  return py_equal(binary_op("%", value, Value(2)), Value(0));
}

bool test_divisibleby(Evaluator&, const Value& value, CallArgs& args) {
  const auto a = bind_args("divisibleby", args, {{"num"}});
  return py_equal(binary_op("%", value, a[0]), Value(0));
}

bool test_sameas(Evaluator&, const Value& value, CallArgs& args) { return value.same_object(one_arg("sameas", args)); }
bool test_in(Evaluator&, const Value& value, CallArgs& args) { return contains(one_arg("in", args), value); }

template <const char* Op>
bool compare(Evaluator&, const Value& value, CallArgs& args) {
  return compare_op(Op, value, one_arg(Op, args));
}

constexpr char kEq[] = "==", kNe[] = "!=", kLt[] = "<", kLe[] = "<=", kGt[] = ">", kGe[] = ">=";

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", plain<is_defined>},
      {"undefined", plain<is_undefined>},
      {"none", plain<is_none>},
      {"boolean", plain<is_boolean>},
      {"false", plain<is_false>},
      {"true", plain<is_true>},
      {"integer", plain<is_integer>},
      {"float", plain<is_float>},
      {"number", plain<is_number>},
      {"string", plain<is_string>},
      {"mapping", plain<is_mapping>},
      {"iterable", plain<is_iterable>},
      {"sequence", plain<is_sequence>},
      {"callable", plain<is_callable>},
      {"escaped", plain<is_escaped>},
      {"lower", plain<is_lower>},
      {"upper", plain<is_upper>},
      {"filter", plain<is_filter_name>},
      {"test", plain<is_test_name>},
      {"odd", test_odd},
      {"even", test_even},
      {"divisibleby", test_divisibleby},
      {"sameas", test_sameas},
      {"in", test_in},
      {"==", compare<kEq>},
      {"eq", compare<kEq>},
      {"equalto", compare<kEq>},
      {"!=", compare<kNe>},
      {"ne", compare<kNe>},
      {"<", compare<kLt>},
      {"lt", compare<kLt>},
      {"lessthan", compare<kLt>},
      {"<=", compare<kLe>},
      {"le", compare<kLe>},
      {">", compare<kGt>},
      {"gt", compare<kGt>},
      {"greaterthan", compare<kGt>},
      {">=", compare<kGe>},
      {"ge", compare<kGe>},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto it = test_table().find(name);
  return it == test_table().end() ? nullptr : it->second;
}

void raise_unknown_test(std::string_view name) { raise(ErrorKind::kSyntax, "no test named '{}'", name); }

}  // namespace imp::text::jinja
