// Conversions between JSON and template values. to_json is Python's json.dumps, which Hugging Face's
// tojson filter calls (ensure_ascii=False by default, no HTML escaping, indent/separators/sort_keys).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace imp::text::jinja {

// Object key order is kept as given (use ordered_json to keep a request's order).
Value from_json(const nlohmann::ordered_json& json);
Value from_json(const nlohmann::json& json);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line; otherwise the text repeated per level
  std::string item_separator = ", ";  // Python's default; "," when indenting
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Raises TypeError for values JSON cannot hold (undefined, namespaces, functions, generators).
std::string to_json(const Value& value, const JsonOptions& options);

}  // namespace imp::text::jinja
