// Splits template source into tokens the way jinja2's lexer does with Hugging Face's settings:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, newlines normalised to "\n",
// whitespace control with "-" and "+" on every tag, {% raw %} blocks, comments dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace imp::text::jinja {

enum class TokenType {
  kData,           // literal template text (already whitespace-controlled)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, operator, or the unescaped string literal
  int64_t integer = 0;
  double number = 0.0;
  int line = 1;

  bool is_operator(std::string_view op) const { return type == TokenType::kOperator && text == op; }
  bool is_name(std::string_view name) const { return type == TokenType::kName && text == name; }
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Raises TemplateError (kSyntax) with the line of the offending text.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

// A readable name for error messages ("end of statement block", "'x'", ...).
std::string describe(const Token& token);

}  // namespace imp::text::jinja
