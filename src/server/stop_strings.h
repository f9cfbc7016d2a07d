// Cuts generated text at the first of the request's stop strings (OpenAI's "stop"): the stop string and
// everything after it are never shown. While text could still turn into a stop string, it is held back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace imp::server {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Returns the text that is now safe to show; after a match, only the text before it and nothing later.
  std::string feed(std::string_view delta);
  std::string finish();  // what was held back (no stop string can complete any more)
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace imp::server
