#include "text/parser_common.h"

#include <algorithm>

namespace imp::text {

namespace parser_detail {

void append_text(std::vector<OutputEvent>& events, OutputEventKind kind, std::string_view text) {
  if (text.empty()) return;
  if (!events.empty() && events.back().kind == kind) {
    events.back().text += text;
    return;
  }
  OutputEvent& event = events.emplace_back();
  event.kind = kind;
  event.text = text;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

std::string_view trim(std::string_view s) {
  const size_t begin = skip_space(s, 0);
  size_t end = s.size();
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

Match match_at(std::string_view s, size_t pos, std::string_view tag) {
  const std::string_view rest = pos < s.size() ? s.substr(pos) : std::string_view{};
  if (rest.size() >= tag.size()) return rest.starts_with(tag) ? Match::full : Match::none;
  return tag.starts_with(rest) ? Match::partial : Match::none;
}

Match match_open(std::string_view s, size_t pos, std::string_view tag) {
  const Match m = match_at(s, pos, tag);
  if (m != Match::full) return m;
  const size_t next = pos + tag.size();
  if (next == s.size()) return Match::partial;
  return s[next] == '=' || is_space(s[next]) ? Match::full : Match::none;
}

size_t partial_tag_start(std::string_view s, std::string_view tag) {
  const size_t longest = std::min(s.size(), tag.size() - 1);
  for (size_t len = longest; len > 0; --len) {
    if (tag.starts_with(s.substr(s.size() - len))) return s.size() - len;
  }
  return std::string_view::npos;
}

size_t utf8_complete_end(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    const size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;  // no lead byte in reach: not UTF-8, pass it through
}

}  // namespace parser_detail
}  // namespace imp::text
