#include "text/jinja/strings.h"

#include <algorithm>

#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace imp::text::jinja::strings {
namespace {

using unicode::decode;
using unicode::encode;

// Python's slice bounds clamped to [0, length].
std::pair<int64_t, int64_t> bounds(int64_t length, std::optional<int64_t> start, std::optional<int64_t> end) {
  auto fix = [length](int64_t i) {
    if (i < 0) i += length;
    return std::clamp<int64_t>(i, 0, length);
  };
  return {start ? fix(*start) : 0, end ? fix(*end) : length};
}

}  // namespace

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) raise(ErrorKind::kType, "empty separator");
    size_t pos = 0;
    while (maxsplit-- > 0) {
      const size_t found = text.find(*sep, pos);
      if (found == std::string_view::npos) break;
      parts.emplace_back(text.substr(pos, found - pos));
      pos = found + sep->size();
    }
    parts.emplace_back(text.substr(pos));
    return parts;
  }
  const std::u32string cps = decode(text);
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && unicode::is_space(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit-- <= 0) {
      parts.push_back(encode(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !unicode::is_space(cps[j])) ++j;
    parts.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) raise(ErrorKind::kType, "empty separator");
    size_t end = text.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      const size_t found = text.rfind(*sep, end - sep->size());
      if (found == std::string_view::npos) break;
      parts.emplace_back(text.substr(found + sep->size(), end - found - sep->size()));
      end = found;
    }
    parts.emplace_back(text.substr(0, end));
    return {parts.rbegin(), parts.rend()};
  }
  const std::u32string cps = decode(text);
  size_t j = cps.size();
  while (true) {
    while (j > 0 && unicode::is_space(cps[j - 1])) --j;
    if (j == 0) break;
    if (maxsplit-- <= 0) {
      parts.push_back(encode(std::u32string_view(cps).substr(0, j)));
      break;
    }
    size_t i = j;
    while (i > 0 && !unicode::is_space(cps[i - 1])) --i;
    parts.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    j = i;
  }
  return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> splitlines(std::string_view text, bool keepends) {
  const std::u32string cps = decode(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!unicode::is_line_break(cps[i])) continue;
    size_t end = i + 1;
    if (cps[i] == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    lines.push_back(encode(std::u32string_view(cps).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) lines.push_back(encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, Side side) {
  const std::u32string cps = decode(text);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : unicode::is_space(cp); };
  size_t begin = 0, end = cps.size();
  if (side != Side::kRight) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (side != Side::kLeft) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  return encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cps = decode(text);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count > 0) {
        out += replacement;
        --count;
      }
      if (i < cps.size()) unicode::append(out, cps[i]);
    }
    return out;
  }
  size_t pos = 0;
  while (count > 0) {
    const size_t found = text.find(old, pos);
    if (found == std::string_view::npos) break;
    out.append(text.substr(pos, found - pos));
    out.append(replacement);
    pos = found + old.size();
    --count;
  }
  out.append(text.substr(pos));
  return out;
}

int64_t find(std::string_view text, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
             bool reverse) {
  const std::u32string cps = decode(text);
  const std::u32string needle = decode(sub);
  const auto [lo, hi] = bounds(static_cast<int64_t>(cps.size()), start, end);
  const int64_t n = static_cast<int64_t>(needle.size());
  if (hi - lo < n) return -1;
  const std::u32string_view window =
      std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  const size_t found = reverse ? window.rfind(needle) : window.find(needle);
  return found == std::u32string_view::npos ? -1 : lo + static_cast<int64_t>(found);
}

int64_t count(std::string_view text, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end) {
  const std::u32string cps = decode(text);
  const std::u32string needle = decode(sub);
  const auto [lo, hi] = bounds(static_cast<int64_t>(cps.size()), start, end);
  if (hi < lo) return 0;
  if (needle.empty()) return hi - lo + 1;
  const std::u32string_view window =
      std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo));
  int64_t total = 0;
  for (size_t pos = window.find(needle); pos != std::u32string_view::npos;
       pos = window.find(needle, pos + needle.size())) {
    ++total;
  }
  return total;
}

bool starts_with(std::string_view text, std::string_view prefix, std::optional<int64_t> start,
                 std::optional<int64_t> end, bool at_end) {
  if (!start && !end) return at_end ? text.ends_with(prefix) : text.starts_with(prefix);
  const std::u32string cps = decode(text);
  const auto [lo, hi] = bounds(static_cast<int64_t>(cps.size()), start, end);
  if (hi < lo) return false;
  const std::string window =
      encode(std::u32string_view(cps).substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo)));
  return at_end ? std::string_view(window).ends_with(prefix) : std::string_view(window).starts_with(prefix);
}

std::string title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode(text)) {
    if (previous_cased) {
      out += unicode::lower(encode(std::u32string(1, cp)));
    } else {
      unicode::append_title(out, cp);
    }
    previous_cased = unicode::is_cased(cp);
  }
  return out;
}

std::string capitalize(std::string_view text) {
  const std::u32string cps = decode(text);
  if (cps.empty()) return "";
  std::string out;
  unicode::append_title(out, cps[0]);
  return out + unicode::lower(encode(std::u32string_view(cps).substr(1)));
}

std::string swapcase(std::string_view text) {
  std::string out;
  for (char32_t cp : decode(text)) {
    if (unicode::is_upper(cp)) {
      out += unicode::lower(encode(std::u32string(1, cp)));
    } else if (unicode::is_lower(cp)) {
      unicode::append_upper(out, cp);
    } else {
      unicode::append(out, cp);
    }
  }
  return out;
}

bool is_title(std::string_view text) {
  bool cased = false, previous_cased = false;
  for (char32_t cp : decode(text)) {
    const bool upper_like = unicode::is_upper(cp) || (unicode::is_cased(cp) && !unicode::is_lower(cp));
    if (upper_like) {
      if (previous_cased) return false;
      previous_cased = cased = true;
    } else if (unicode::is_lower(cp)) {
      if (!previous_cased) return false;
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return cased;
}

bool is_lower(std::string_view text) {
  bool cased = false;
  for (char32_t cp : decode(text)) {
    if (unicode::is_upper(cp) || (unicode::is_cased(cp) && !unicode::is_lower(cp))) return false;
    cased |= unicode::is_lower(cp);
  }
  return cased;
}

bool is_upper(std::string_view text) {
  bool cased = false;
  for (char32_t cp : decode(text)) {
    if (unicode::is_lower(cp) || (unicode::is_cased(cp) && !unicode::is_upper(cp))) return false;
    cased |= unicode::is_upper(cp);
  }
  return cased;
}

bool all_chars(std::string_view text, bool (*predicate)(char32_t)) {
  if (text.empty()) return false;
  for (char32_t cp : decode(text)) {
    if (!predicate(cp)) return false;
  }
  return true;
}

std::string pad(std::string_view text, int64_t width, char32_t fill, char align) {
  const int64_t length = static_cast<int64_t>(unicode::length(text));
  if (width <= length) return std::string(text);
  const int64_t missing = width - length;
  int64_t left = 0;
  if (align == '>') left = missing;
  if (align == '^') left = missing / 2 + (missing & width & 1);  // CPython's centring rule
  std::string fill_text;
  unicode::append(fill_text, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill_text;
  out += text;
  for (int64_t i = left; i < missing; ++i) out += fill_text;
  return out;
}

std::string zfill(std::string_view text, int64_t width) {
  const int64_t length = static_cast<int64_t>(unicode::length(text));
  if (width <= length) return std::string(text);
  const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  return std::string(text.substr(0, sign)) + std::string(static_cast<size_t>(width - length), '0') +
         std::string(text.substr(sign));
}

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace imp::text::jinja::strings
