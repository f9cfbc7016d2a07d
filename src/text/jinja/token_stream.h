// The token cursor shared by the expression and statement parsers.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/lexer.h"

namespace imp::text::jinja {

using Names = std::vector<std::string_view>;

inline bool contains(const Names& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 protected:
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool at_op(std::string_view op) const { return cur().is_operator(op); }
  bool at_name(std::string_view name) const { return cur().is_name(name); }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& message, int line = 0) const {
    throw TemplateError(ErrorKind::kSyntax, message, line > 0 ? line : cur().line);
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  const Token& expect(TokenType type, std::string_view what) {
    if (cur().type != type) fail(fmt::format("expected {}, got {}", what, describe(cur())));
    return next();
  }
  std::string expect_name() { return expect(TokenType::kName, "a name").text; }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  // Names read while parsing macro bodies (a macro that reads varargs/kwargs/caller accepts them).
  std::vector<std::set<std::string>> name_sinks_;
};

}  // namespace imp::text::jinja
