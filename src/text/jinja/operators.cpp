#include "text/jinja/operators.h"

#include <cmath>

#include "text/jinja/format.h"
#include "text/jinja/unicode.h"
#include "text/jinja/strings.h"

namespace imp::text::jinja {
namespace {

constexpr size_t kMaxRepeat = size_t{1} << 28;  // refuse to build strings or lists beyond 256M items

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  if (a.is_string() && op == "+") {
    raise(ErrorKind::kType, "can only concatenate str (not \"{}\") to str", b.type_name());
  }
  if (a.is_sequence_kind(SeqKind::kList) && op == "+") {
    raise(ErrorKind::kType, "can only concatenate list (not \"{}\") to list", b.type_name());
  }
  raise(ErrorKind::kType, "unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

Value repeat(const Value& sequence, int64_t count) {
  if (count < 0) count = 0;
  if (sequence.is_string()) {
    const std::string& text = sequence.as_string();
    if (!text.empty() && static_cast<size_t>(count) > kMaxRepeat / text.size())
      raise(ErrorKind::kType, "repeated string is too large");
    std::string out;
    out.reserve(text.size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out += text;
    return Value(std::move(out), sequence.is_markup());
  }
  const ListData& list = sequence.as_list();
  if (!list.items.empty() && static_cast<size_t>(count) > kMaxRepeat / list.items.size())
    raise(ErrorKind::kType, "repeated list is too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), list.items.begin(), list.items.end());
  return Value::list(std::move(out), list.kind);
}

bool repeatable(const Value& v) {
  return v.is_string() || v.is_sequence_kind(SeqKind::kList) || v.is_sequence_kind(SeqKind::kTuple);
}

// Python's float floor division and modulo (result takes the divisor's sign).
void float_divmod(double a, double b, double* floor_div, double* mod) {
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0.0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  double floored = 0.0;
  if (div != 0.0) {
    floored = std::floor(div);
    if (div - floored > 0.5) floored += 1.0;
  } else {
    floored = std::copysign(0.0, a / b);
  }
  *floor_div = floored;
  *mod = m;
}

// Runs a __builtin_*_overflow operation and raises on overflow (Python would switch to big integers).
template <typename Op>
int64_t checked(Op op) {
  int64_t result = 0;
  if (op(&result)) raise(ErrorKind::kUnsupported, "integer overflow: imp's templates use 64-bit integers");
  return result;
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  const bool numbers = a.is_number() && b.is_number();
  const bool integers = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (integers) {
      return Value(checked([&](int64_t* r) { return __builtin_add_overflow(a.as_int(), b.as_int(), r); }));
    }
    if (numbers) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      // markupsafe.Markup escapes the plain string it is joined with.
      if (a.is_markup() && !b.is_markup()) return Value(a.as_string() + strings::html_escape(b.as_string()), true);
      if (b.is_markup() && !a.is_markup()) return Value(strings::html_escape(a.as_string()) + b.as_string(), true);
      return Value(a.as_string() + b.as_string(), a.is_markup());
    }
    if (a.is_list() && b.is_list()) {
      const SeqKind kind = a.as_list().kind;
      if ((kind == SeqKind::kList || kind == SeqKind::kTuple) && b.as_list().kind == kind) {
        std::vector<Value> items = a.as_list().items;
        items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
        return Value::list(std::move(items), kind);
      }
    }
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (integers) {
      return Value(checked([&](int64_t* r) { return __builtin_sub_overflow(a.as_int(), b.as_int(), r); }));
    }
    if (numbers) return Value(a.as_float() - b.as_float());
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (integers) {
      return Value(checked([&](int64_t* r) { return __builtin_mul_overflow(a.as_int(), b.as_int(), r); }));
    }
    if (numbers) return Value(a.as_float() * b.as_float());
    if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int());
    if (a.is_integral() && repeatable(b)) return repeat(b, a.as_int());
    unsupported_operands(op, a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported_operands(op, a, b);
    if (b.as_float() == 0.0) raise(ErrorKind::kType, "division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b), a.is_markup());
    if (!numbers) unsupported_operands(op, a, b);
    if (integers) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      if (y == 0)
        raise(ErrorKind::kType, "{}", op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value(int64_t{0});
        checked([](int64_t*) { return true; });
      }
      int64_t q = x / y;
      int64_t r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        r += y;
        q -= 1;
      }
      return Value(op == "%" ? r : q);
    }
    if (b.as_float() == 0.0) raise(ErrorKind::kType, "{}", op == "%" ? "float modulo" : "float floor division by zero");
    double q = 0.0, r = 0.0;
    float_divmod(a.as_float(), b.as_float(), &q, &r);
    return Value(op == "%" ? r : q);
  }
  if (op == "**") {
    if (!numbers) unsupported_operands(op, a, b);
    if (integers && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int(), exponent = b.as_int();
      bool overflow = false;
      while (exponent > 0) {
        if (exponent & 1) overflow |= __builtin_mul_overflow(result, base, &result);
        exponent >>= 1;
        if (exponent > 0) overflow |= __builtin_mul_overflow(base, base, &base);
      }
      if (overflow) checked([](int64_t*) { return true; });
      return Value(result);
    }
    const double x = a.as_float();
    const double y = b.as_float();
    if (x == 0.0 && y < 0) raise(ErrorKind::kType, "0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y)) {
      raise(ErrorKind::kUnsupported, "a negative number to a fractional power is complex; imp has no complex numbers");
    }
    return Value(std::pow(x, y));
  }
  raise(ErrorKind::kSyntax, "unknown operator '{}'", op);
}

Value negate(const Value& value) {
  if (value.is_undefined()) value.fail_undefined();
  if (value.is_integral()) {
    return Value(checked([&](int64_t* r) { return __builtin_sub_overflow(int64_t{0}, value.as_int(), r); }));
  }
  if (value.is_float()) return Value(-value.as_float());
  raise(ErrorKind::kType, "bad operand type for unary -: '{}'", value.type_name());
}

Value positive(const Value& value) {
  if (value.is_undefined()) value.fail_undefined();
  if (value.is_integral()) return Value(value.as_int());
  if (value.is_float()) return value;
  raise(ErrorKind::kType, "bad operand type for unary +: '{}'", value.type_name());
}

bool compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "<") return py_less(a, b);
  if (op == ">") return py_less(b, a);
  if (op == "<=") return py_less(a, b) || py_equal(a, b);
  if (op == ">=") return py_less(b, a) || py_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  raise(ErrorKind::kSyntax, "unknown comparison '{}'", op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::kUndefined: return false;
    case Type::kString:
      if (!item.is_string()) {
        raise(ErrorKind::kType, "'in <string>' requires string as left operand, not {}", item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Type::kList:
      if (container.as_list().kind == SeqKind::kIterator) {
        // Python's `in` on a generator takes items until it finds a match.
        while (std::optional<Value> element = next_item(container)) {
          if (py_equal(*element, item)) return true;
        }
        return false;
      }
      for (const Value& element : container.as_list().items) {
        if (py_equal(element, item)) return true;
      }
      return false;
    case Type::kDict: return container.as_dict().find(item) != nullptr;
    default: raise(ErrorKind::kType, "argument of type '{}' is not iterable", container.type_name());
  }
}

Value slice(const Value& object, const Value& start_value, const Value& stop_value, const Value& step_value) {
  if (object.is_undefined()) object.fail_undefined();
  auto index_ok = [](const Value& v) { return v.is_none() || v.is_undefined() || v.is_integral(); };
  const bool sliceable = object.is_string() || (object.is_list() && object.as_list().kind != SeqKind::kIterator &&
                                                object.as_list().kind != SeqKind::kView);
  if (!sliceable || !index_ok(start_value) || !index_ok(stop_value) || !index_ok(step_value)) {
    return Value::undefined(fmt::format("{} object has no element slice", object.type_name()));
  }
  const int64_t step = step_value.is_integral() ? step_value.as_int() : 1;
  if (step == 0) raise(ErrorKind::kType, "slice step cannot be zero");
  std::u32string chars;
  int64_t length = 0;
  if (object.is_string()) {
    chars = unicode::decode(object.as_string());
    length = static_cast<int64_t>(chars.size());
  } else {
    length = static_cast<int64_t>(object.as_list().items.size());
  }
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (!v.is_integral()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  const int64_t start = adjust(start_value, step < 0 ? length - 1 : 0);
  const int64_t stop = adjust(stop_value, step < 0 ? -1 : length);
  std::vector<int64_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(i);
  if (object.is_string()) {
    std::string out;
    for (int64_t i : picks) unicode::append(out, chars[static_cast<size_t>(i)]);
    return Value(std::move(out), object.is_markup());
  }
  const ListData& list = object.as_list();
  std::vector<Value> out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(list.items[static_cast<size_t>(i)]);
  return Value::list(std::move(out), list.kind == SeqKind::kTuple ? SeqKind::kTuple : SeqKind::kList);
}

}  // namespace imp::text::jinja
