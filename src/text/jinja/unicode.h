// Python-compatible character classes and case mapping over UTF-8 text. Jinja templates are evaluated
// with Python str semantics (code point indexing, str.isspace, str.lower, repr's printable test), so the
// engine needs the same notions; utf8proc supplies the Unicode tables.
#pragma once

#include <string>
#include <string_view>

namespace imp::text::jinja::unicode {

// Invalid UTF-8 bytes decode to U+FFFD: the engine never fails on text it only copies.
std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);
void append(std::string& out, char32_t cp);
size_t length(std::string_view utf8);

bool is_space(char32_t cp);       // str.isspace, also re's \s
bool is_line_break(char32_t cp);  // str.splitlines boundaries
bool is_printable(char32_t cp);   // str.isprintable (repr escapes the rest)
bool is_alpha(char32_t cp);
bool is_decimal(char32_t cp);
bool is_digit(char32_t cp);
bool is_numeric(char32_t cp);
bool is_alnum(char32_t cp);
bool is_word(char32_t cp);  // re's \w
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
bool is_cased(char32_t cp);
char32_t to_lower(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_title(char32_t cp);

// Full case mappings, as Python's str.lower/upper/title: "ß" uppers to "SS", "İ" lowers to "i̇",
// a word-final "Σ" lowers to "ς".
void append_upper(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);
std::string lower(std::string_view utf8);
std::string upper(std::string_view utf8);

}  // namespace imp::text::jinja::unicode
