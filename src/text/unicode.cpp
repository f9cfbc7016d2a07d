#include "text/unicode.h"

#include <algorithm>
#include <cstring>

namespace imp::text::unicode {

bool CodePointSet::contains(char32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                             [](char32_t value, const CodePointRange& range) { return value < range.first; });
  return it != ranges_.begin() && c <= std::prev(it)->last;
}

namespace {

// Allowed range of the second byte for each lead byte (Unicode Table 3-7); later bytes are 80..BF.
struct LeadInfo {
  uint8_t length;  // 0: not a lead byte
  uint8_t second_low;
  uint8_t second_high;
};

constexpr LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Step next_utf8(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t available = text.size() - pos;
  const LeadInfo lead = lead_info(p[0]);
  if (lead.length == 0) return {Utf8Kind::kInvalid, 1};
  if (lead.length == 1) return {Utf8Kind::kChar, 1};
  for (size_t i = 1; i < lead.length; ++i) {
    if (i == available) return {Utf8Kind::kIncomplete, i};
    const uint8_t low = i == 1 ? lead.second_low : 0x80;
    const uint8_t high = i == 1 ? lead.second_high : 0xBF;
    if (p[i] < low || p[i] > high) return {Utf8Kind::kInvalid, i};
  }
  return {Utf8Kind::kChar, lead.length};
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    // ASCII runs eight bytes at a time: the common case for prose and code.
    while (pos + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= n) break;
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = next_utf8(text, pos);
    if (step.kind != Utf8Kind::kChar) return false;
    pos += step.length;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = next_utf8(text, pos);
    if (step.kind == Utf8Kind::kChar) {
      out.append(text.substr(pos, step.length));
    } else {
      out.append(kReplacementUtf8);
    }
    pos += step.length;
  }
  return out;
}

char32_t decode_at(std::string_view text, size_t& pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  if (p[0] < 0x80) {
    ++pos;
    return p[0];
  }
  if (p[0] < 0xE0) {
    pos += 2;
    return (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
  }
  if (p[0] < 0xF0) {
    pos += 3;
    return (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
  }
  pos += 4;
  return (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) | (char32_t{p[2] & 0x3Fu} << 6) |
         (p[3] & 0x3Fu);
}

char32_t decode_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return decode_at(text, start);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace imp::text::unicode
