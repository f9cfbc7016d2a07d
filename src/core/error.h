// One exception type for load-time and configuration errors. The message is meant for the user:
// it names the file, tensor or field at fault and what would fix it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace imp {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Out of GPU or pinned host memory; callers that know what they were placing add that to the message.
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& message, bool pinned_host) : Error(message), pinned_host_(pinned_host) {}
  bool pinned_host() const { return pinned_host_; }

 private:
  bool pinned_host_;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace imp
