// Python's operators on template values: arithmetic with int/float promotion and floor semantics,
// comparisons, membership, slicing. Undefined operands raise like jinja2's Undefined does.
#pragma once

#include <string_view>

#include "text/jinja/value.h"

namespace imp::text::jinja {

// op is one of + - * / // % **
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& value);
Value positive(const Value& value);
// op is one of == != < <= > >= in notin
bool compare_op(std::string_view op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // Python `item in container`
// object[start:stop:step]; undefined where Python raises TypeError (jinja2's sandbox turns it into undefined).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace imp::text::jinja
