// Python's str algorithms on UTF-8 text, by code point: split, strip, replace, find, title, ...
// Shared by the str methods (methods.cpp) and the filters that call them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imp::text::jinja::strings {

// str.split / str.rsplit; sep nullopt splits on whitespace runs. Raises for an empty separator.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view text, bool keepends);

enum class Side { kBoth, kLeft, kRight };
// chars nullopt strips whitespace.
std::string strip(std::string_view text, const std::optional<std::string>& chars, Side side = Side::kBoth);

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
// Code point index of sub within text[start:end] (Python slice bounds), or -1.
int64_t find(std::string_view text, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
             bool reverse);
int64_t count(std::string_view text, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end);
bool starts_with(std::string_view text, std::string_view prefix, std::optional<int64_t> start,
                 std::optional<int64_t> end, bool at_end);

std::string title(std::string_view text);       // str.title
std::string capitalize(std::string_view text);  // str.capitalize
std::string swapcase(std::string_view text);
bool is_title(std::string_view text);
bool is_lower(std::string_view text);
bool is_upper(std::string_view text);
// Whether text is non-empty and every character passes `predicate`.
bool all_chars(std::string_view text, bool (*predicate)(char32_t));

std::string pad(std::string_view text, int64_t width, char32_t fill, char align);  // '<' ljust, '>' rjust, '^' center
std::string zfill(std::string_view text, int64_t width);
// jinja2 escape: & < > " ' as HTML entities (markupsafe's spelling).
std::string html_escape(std::string_view text);

}  // namespace imp::text::jinja::strings
