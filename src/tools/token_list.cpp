#include "tools/token_list.h"

#include <algorithm>
#include <climits>
#include <string>

#include "core/error.h"

namespace imp::tools {

std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view what) {
  constexpr std::string_view kSeparators = " \t\r\n,";
  std::vector<int32_t> ids;
  size_t pos = 0;
  while ((pos = text.find_first_not_of(kSeparators, pos)) != std::string_view::npos) {
    const size_t end = std::min(text.find_first_of(kSeparators, pos), text.size());
    const std::string item(text.substr(pos, end - pos));
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < 0 || value > INT32_MAX) {
      fail("{}: '{}' is not a token id (expected non-negative integers separated by commas)", what, item);
    }
    ids.push_back(static_cast<int32_t>(value));
    pos = end;
  }
  return ids;
}

}  // namespace imp::tools
