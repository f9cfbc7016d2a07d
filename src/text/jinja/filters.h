// The filter table, filled by the files that implement filters (filters.cpp, filters_sequence.cpp).
#pragma once

#include <string_view>
#include <unordered_map>

#include "text/jinja/builtins.h"

namespace imp::text::jinja {

using FilterTable = std::unordered_map<std::string_view, FilterFn>;

void add_sequence_filters(FilterTable& table);
// Python str() for filters that take text (jinja2's soft_str: markup stays markup).
Value soft_str(const Value& value);

}  // namespace imp::text::jinja
