// An error the server answers with an OpenAI-style body: {"error": {"message", "type", "param", "code"}}.
// Thrown by request parsing and prompt building; the HTTP layer turns it into the response.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace imp::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)), status(status), param(std::move(param)), code(std::move(code)) {}

  int status;
  std::string param;  // the request field at fault, when there is one
  std::string code;   // e.g. "invalid_api_key", "model_not_found", "context_length_exceeded"

  // OpenAI's error "type" for the status.
  const char* type() const {
    if (status == 401) return "authentication_error";
    if (status == 503 || status == 429) return "server_overloaded";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
  }
};

// A 400 naming the field at fault.
template <typename... Args>
[[noreturn]] void bad_request(std::string param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), std::move(param));
}

}  // namespace imp::server
