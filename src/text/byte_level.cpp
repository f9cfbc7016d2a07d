#include "text/byte_level.h"

#include <array>

#include "text/unicode.h"

namespace imp::text::byte_level {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in order, to U+0100 onwards.
constexpr bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<char32_t, 256> to_char{};
  static constexpr char32_t kLimit = 0x100 + 68;
  std::array<int16_t, kLimit> to_byte{};  // -1: not in the alphabet
};

constexpr Tables make_tables() {
  Tables t;
  for (auto& b : t.to_byte) b = -1;
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    t.to_char[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
    t.to_byte[t.to_char[b]] = static_cast<int16_t>(b);
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

char32_t byte_to_char(uint8_t byte) { return kTables.to_char[byte]; }

std::optional<std::string> chars_to_bytes(std::string_view token) {
  if (!unicode::is_valid_utf8(token)) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const char32_t c = unicode::decode_at(token, pos);
    if (c >= Tables::kLimit || kTables.to_byte[c] < 0) return std::nullopt;
    out.push_back(static_cast<char>(kTables.to_byte[c]));
  }
  return out;
}

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) unicode::append_utf8(out, kTables.to_char[static_cast<uint8_t>(b)]);
  return out;
}

}  // namespace imp::text::byte_level
