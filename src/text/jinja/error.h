// Template errors. Every error names the template line it comes from; `kind` lets callers tell a
// template's own raise_exception (a request the template refuses: HTTP 400) from a broken template.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/error.h"

namespace imp::text::jinja {

enum class ErrorKind {
  kSyntax,       // the template does not parse (TemplateSyntaxError)
  kUndefined,    // an operation on an undefined value (UndefinedError)
  kType,         // wrong operand or argument types (TypeError, ValueError, ...)
  kSecurity,     // what jinja2's immutable sandbox forbids (SecurityError)
  kRaised,       // the template called raise_exception(message)
  kUnsupported,  // valid jinja2 that imp does not implement
};

const char* error_kind_name(ErrorKind kind);

class TemplateError : public imp::Error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0, std::string source_name = {})
      : imp::Error(format_what(kind, message, line, source_name)),
        kind_(kind),
        message_(std::move(message)),
        line_(line),
        source_name_(std::move(source_name)) {}

  ErrorKind kind() const { return kind_; }
  // The bare message, e.g. the text given to raise_exception.
  const std::string& message() const { return message_; }
  int line() const { return line_; }  // 0 while not yet attributed to a line
  const std::string& source_name() const { return source_name_; }

  // The same error attributed to a line of a named template.
  TemplateError at(int line, const std::string& source_name) const {
    return TemplateError(kind_, message_, line_ > 0 ? line_ : line, source_name_.empty() ? source_name : source_name_);
  }

 private:
  static std::string format_what(ErrorKind kind, const std::string& message, int line, const std::string& name) {
    std::string where = name.empty() ? "template" : name;
    if (line > 0) where += fmt::format(", line {}", line);
    return fmt::format("{}: {}: {}", where, error_kind_name(kind), message);
  }

  ErrorKind kind_;
  std::string message_;
  int line_;
  std::string source_name_;
};

template <typename... Args>
[[noreturn]] void raise(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw TemplateError(kind, fmt::format(format, std::forward<Args>(args)...));
}

inline const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax: return "syntax error";
    case ErrorKind::kUndefined: return "undefined value";
    case ErrorKind::kType: return "type error";
    case ErrorKind::kSecurity: return "sandbox violation";
    case ErrorKind::kRaised: return "raise_exception";
    case ErrorKind::kUnsupported: return "unsupported by imp";
  }
  return "error";
}

}  // namespace imp::text::jinja
