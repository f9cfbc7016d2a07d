// Token ids written by a person: non-negative integers separated by commas and/or whitespace.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace imp::tools {

// Throws imp::Error naming `what` (the option) and the offending item.
std::vector<int32_t> parse_token_ids(std::string_view text, std::string_view what);

}  // namespace imp::tools
