// The registries behind names a template can use: filters (value|name), tests (value is name),
// attribute and item access with Python's methods (str.split, dict.items, ...), and the globals
// (range, namespace, dict, raise_exception, strftime_now, cycler, joiner).
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace imp::text::jinja {

using FilterFn = Value (*)(Evaluator& evaluator, const Value& value, CallArgs& args);
using TestFn = bool (*)(Evaluator& evaluator, const Value& value, CallArgs& args);

// nullptr when the name is unknown; see raise_unknown for the error.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// jinja2's error for a filter/test name: kUnsupported when jinja2 has it, kSyntax when nobody does.
[[noreturn]] void raise_unknown_filter(std::string_view name);
[[noreturn]] void raise_unknown_test(std::string_view name);

// jinja2 sandbox attribute lookup (obj.name): Python attributes first (methods), then dict keys.
Value get_attribute(const Value& object, const std::string& name);
// jinja2 sandbox subscript (obj[key]): items first, then Python attributes for string keys.
Value get_item(const Value& object, const Value& key);
// Calls a Python method of a str, list, tuple or dict receiver.
Value call_method(const Value& receiver, const std::string& name, CallArgs& args);

// Adds the global functions of Hugging Face's chat template environment to `globals`.
void add_globals(DictData& globals);

}  // namespace imp::text::jinja
