// Python-style argument binding for filters, tests, methods and globals: positional and keyword
// arguments matched against a signature with defaults, with Python's TypeError messages.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace imp::text::jinja {

struct Param {
  Param(std::string_view name) : name(name) {}  // required
  Param(std::string_view name, Value default_value) : name(name), default_value(std::move(default_value)) {}
  std::string_view name;
  std::optional<Value> default_value;
};

// The values for `params` in order. Raises TypeError for missing, repeated, surplus or unknown arguments.
std::vector<Value> bind_args(std::string_view function, const CallArgs& args, std::initializer_list<Param> params);

// Raises TypeError unless no arguments were passed.
void expect_no_args(std::string_view function, const CallArgs& args);

}  // namespace imp::text::jinja
