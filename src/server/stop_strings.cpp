#include "server/stop_strings.h"

#include <algorithm>

namespace imp::server {

std::string StopStringMatcher::feed(std::string_view delta) {
  if (matched_) return {};
  if (stops_.empty()) return std::string(delta);
  held_ += delta;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::finish() {
  std::string out;
  out.swap(held_);
  return matched_ ? std::string() : out;
}

}  // namespace imp::server
