#include "text/jinja/lexer.h"

#include <array>

#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace imp::text::jinja {
namespace {

// Operators, longest first so that "//" wins over "/".
constexpr std::array<std::string_view, 26> kOperators = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                                         "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                                         ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.isspace over the UTF-8 text from `from` on; empty text is not whitespace.
bool all_space(std::string_view text) {
  if (text.empty()) return false;
  for (char32_t cp : unicode::decode(text)) {
    if (!unicode::is_space(cp)) return false;
  }
  return true;
}

// Python's str.rstrip() on UTF-8 text.
std::string_view rstrip_space(std::string_view text) {
  std::u32string cps = unicode::decode(text);
  size_t keep = cps.size();
  while (keep > 0 && unicode::is_space(cps[keep - 1])) --keep;
  size_t bytes = 0;
  for (size_t i = 0; i < keep; ++i) {
    const char32_t cp = cps[i];
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  // Invalid bytes decode to U+FFFD (3 bytes); they are not whitespace, so only trust an exact split.
  return bytes <= text.size() ? text.substr(0, bytes) : text;
}

// Length of a run of Python whitespace starting at `pos` (ASCII fast path, Unicode otherwise).
size_t space_run(std::string_view text, size_t pos) {
  size_t end = pos;
  while (end < text.size()) {
    if (is_ascii_space(text[end]) || (text[end] >= 0x1C && text[end] <= 0x1F)) {
      ++end;
      continue;
    }
    if (static_cast<unsigned char>(text[end]) < 0x80) break;
    size_t len = 1;
    while (end + len < text.size() && (static_cast<unsigned char>(text[end + len]) & 0xC0) == 0x80) ++len;
    const std::u32string cp = unicode::decode(text.substr(end, len));
    if (cp.size() != 1 || !unicode::is_space(cp[0])) break;
    end += len;
  }
  return end - pos;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options) : options_(options) {
    // Only "\n", "\r\n" and "\r" are line breaks; all become "\n". One trailing newline goes.
    source_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        source_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        source_ += source[i];
      }
    }
    if (!options_.keep_trailing_newline && !source_.empty() && source_.back() == '\n') source_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < source_.size()) lex_root();
    push(TokenType::kEof, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(ErrorKind::kSyntax, message, line_); }

  void advance(size_t to) {
    for (size_t i = pos_; i < to; ++i) line_ += source_[i] == '\n';
    pos_ = to;
  }

  Token& push(TokenType type, std::string text) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.line = line_;
    tokens_.push_back(std::move(token));
    return tokens_.back();
  }

  bool starts_with(size_t at, std::string_view text) const { return source_.compare(at, text.size(), text) == 0; }

  // Applies "-" stripping or lstrip_blocks to the text before a tag whose sign is `sign`.
  std::string_view control_leading(std::string_view text, char sign, bool lstrip_allowed) const {
    if (sign == '-') return rstrip_space(text);
    if (sign != '+' && options_.lstrip_blocks && lstrip_allowed) {
      const size_t last_newline = text.rfind('\n');
      const size_t line_start = last_newline == std::string_view::npos ? 0 : last_newline + 1;
      if ((line_start > 0 || line_starting_) && all_space(text.substr(line_start))) return text.substr(0, line_start);
    }
    return text;
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) push(TokenType::kData, std::string(text));
  }

  // Matches {% raw %} at `at`; returns the end of the tag or npos.
  size_t match_raw_begin(size_t at, std::string_view keyword, char* sign) const {
    size_t p = at + 2;
    *sign = 0;
    if (p < source_.size() && (source_[p] == '-' || source_[p] == '+')) *sign = source_[p++];
    while (p < source_.size() && is_ascii_space(source_[p])) ++p;
    if (!starts_with(p, keyword)) return std::string::npos;
    p += keyword.size();
    while (p < source_.size() && is_ascii_space(source_[p])) ++p;
    return p;
  }

  // Consumes a block end at `p` ("+%}", "-%}" plus whitespace, "%}" plus one newline when trimming).
  size_t block_end_after(size_t p, bool allow_trim) const {
    if (starts_with(p, "+%}")) return p + 3;
    if (starts_with(p, "-%}")) return p + 3 + space_run(source_, p + 3);
    if (starts_with(p, "%}")) {
      p += 2;
      if (allow_trim && options_.trim_blocks && p < source_.size() && source_[p] == '\n') ++p;
      return p;
    }
    return std::string::npos;
  }

  void lex_root() {
    size_t tag = source_.find('{', pos_);
    while (tag != std::string::npos &&
           (tag + 1 >= source_.size() ||
            (source_[tag + 1] != '{' && source_[tag + 1] != '%' && source_[tag + 1] != '#'))) {
      tag = source_.find('{', tag + 1);
    }
    if (tag == std::string::npos) {
      emit_data(std::string_view(source_).substr(pos_));
      advance(source_.size());
      return;
    }
    const char kind = source_[tag + 1];
    const char sign =
        tag + 2 < source_.size() && (source_[tag + 2] == '-' || source_[tag + 2] == '+') ? source_[tag + 2] : 0;
    const std::string_view text = std::string_view(source_).substr(pos_, tag - pos_);

    if (kind == '%') {
      char raw_sign = 0;
      const size_t after_raw = match_raw_begin(tag, "raw", &raw_sign);
      if (after_raw != std::string::npos) {
        // The raw begin tag never eats the newline after it (jinja2's rule has no trim suffix).
        size_t end = std::string::npos;
        if (starts_with(after_raw, "-%}")) end = after_raw + 3 + space_run(source_, after_raw + 3);
        if (starts_with(after_raw, "%}")) end = after_raw + 2;
        if (end != std::string::npos) {
          emit_data(control_leading(text, raw_sign, true));
          advance(end);
          line_starting_ = source_[end - 1] == '\n';
          lex_raw_body();
          return;
        }
      }
    }

    emit_data(control_leading(text, sign, kind != '{'));
    advance(tag);
    const size_t content = tag + 2 + (sign != 0 ? 1 : 0);
    if (kind == '#') {
      lex_comment(content);
      return;
    }
    push(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, kind == '%' ? "{%" : "{{");
    advance(content);
    line_starting_ = false;
    lex_tag(kind == '%');
  }

  void lex_comment(size_t content) {
    size_t close = source_.find("#}", content);
    if (close == std::string::npos) fail("missing end of comment tag");
    size_t end = close + 2;
    const char sign = close > content ? source_[close - 1] : 0;
    if (sign == '-') {
      end += space_run(source_, end);
    } else if (sign != '+' && options_.trim_blocks && end < source_.size() && source_[end] == '\n') {
      ++end;
    }
    advance(end);
    line_starting_ = source_[end - 1] == '\n';
  }

  void lex_raw_body() {
    size_t search = pos_;
    while (true) {
      const size_t tag = source_.find("{%", search);
      if (tag == std::string::npos) fail("missing end of raw directive");
      char sign = 0;
      const size_t after = match_raw_begin(tag, "endraw", &sign);
      const size_t end = after == std::string::npos ? std::string::npos : block_end_after(after, true);
      if (end == std::string::npos) {
        search = tag + 2;
        continue;
      }
      emit_data(control_leading(std::string_view(source_).substr(pos_, tag - pos_), sign, true));
      advance(end);
      line_starting_ = source_[end - 1] == '\n';
      return;
    }
  }

  void lex_tag(bool block) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= source_.size()) {
        fail(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      }
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (block) {
          end = block_end_after(pos_, true);
        } else if (starts_with(pos_, "-}}")) {
          end = pos_ + 3 + space_run(source_, pos_ + 3);
        } else if (starts_with(pos_, "}}")) {
          end = pos_ + 2;
        }
        if (end != std::string::npos) {
          push(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, block ? "%}" : "}}");
          advance(end);
          line_starting_ = source_[end - 1] == '\n';
          return;
        }
      }
      const size_t spaces = space_run(source_, pos_);
      if (spaces > 0) {
        advance(pos_ + spaces);
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  // Digits with optional "_" separators; returns the end position or npos.
  size_t digits_end(size_t p) const {
    if (p >= source_.size() || !is_digit(source_[p])) return std::string::npos;
    while (p < source_.size() &&
           (is_digit(source_[p]) || (source_[p] == '_' && p + 1 < source_.size() && is_digit(source_[p + 1]))))
      ++p;
    return p;
  }

  bool lex_number() {
    const char c = source_[pos_];
    if (!is_digit(c)) return false;
    // Float: digits, then a fraction, an exponent, or both; never right after a "." (x.0.1).
    if (pos_ == 0 || source_[pos_ - 1] != '.') {
      const size_t int_end = digits_end(pos_);
      size_t p = int_end;
      bool is_float = false;
      if (p < source_.size() && source_[p] == '.' && digits_end(p + 1) != std::string::npos) {
        p = digits_end(p + 1);
        is_float = true;
      }
      if (p < source_.size() && (source_[p] == 'e' || source_[p] == 'E')) {
        size_t q = p + 1;
        if (q < source_.size() && (source_[q] == '+' || source_[q] == '-')) ++q;
        if (digits_end(q) != std::string::npos) {
          p = digits_end(q);
          is_float = true;
        }
      }
      if (is_float) {
        std::string text;
        for (size_t i = pos_; i < p; ++i) {
          if (source_[i] != '_') text += source_[i];
        }
        Token& token = push(TokenType::kFloat, text);
        token.number = std::strtod(text.c_str(), nullptr);
        advance(p);
        return true;
      }
    }
    int base = 10;
    size_t p = pos_;
    if (c == '0' && pos_ + 1 < source_.size()) {
      const char prefix = static_cast<char>(source_[pos_ + 1] | 0x20);
      if (prefix == 'b' || prefix == 'o' || prefix == 'x') {
        base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
        p = pos_ + 2;
        if (p < source_.size() && source_[p] == '_') ++p;
        if (p >= source_.size() || hex_value(source_[p]) < 0 || hex_value(source_[p]) >= base) {
          base = 10;  // "0x" without digits: just the integer 0
          p = pos_;
        }
      }
    }
    int64_t value = 0;
    bool overflow = false;
    if (base == 10 && c == '0') {
      // Python forbids leading zeros: "0(_?0)*" is the only decimal that starts with 0.
      ++p;
      while (p < source_.size() &&
             (source_[p] == '0' || (source_[p] == '_' && p + 1 < source_.size() && source_[p + 1] == '0')))
        ++p;
    } else {
      while (p < source_.size()) {
        const char d = source_[p];
        if (d == '_' && p + 1 < source_.size() && hex_value(source_[p + 1]) >= 0 && hex_value(source_[p + 1]) < base) {
          ++p;
          continue;
        }
        const int digit = hex_value(d);
        if (digit < 0 || digit >= base) break;
        overflow |= __builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value);
        ++p;
      }
    }
    if (overflow) fail("integer literal does not fit in 64 bits");
    Token& token = push(TokenType::kInteger, source_.substr(pos_, p - pos_));
    token.integer = value;
    advance(p);
    return true;
  }

  bool lex_name() {
    if (!is_name_start(source_[pos_])) return false;
    size_t p = pos_;
    while (p < source_.size() && is_name_char(source_[p])) ++p;
    push(TokenType::kName, source_.substr(pos_, p - pos_));
    advance(p);
    return true;
  }

  bool lex_string() {
    const char quote = source_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::string value;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= source_.size()) fail("unterminated string literal");
      const char c = source_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= source_.size()) fail("unterminated string literal");
      p += unescape(p, value);
    }
    push(TokenType::kString, std::move(value));
    advance(p + 1);
    return true;
  }

  // Python's unicode-escape for the escape at `p` (a backslash); returns the characters consumed.
  size_t unescape(size_t p, std::string& out) const {
    const char e = source_[p + 1];
    auto hex_escape = [&](size_t digits) -> size_t {
      uint32_t cp = 0;
      for (size_t i = 0; i < digits; ++i) {
        const int h = p + 2 + i < source_.size() ? hex_value(source_[p + 2 + i]) : -1;
        if (h < 0) fail(fmt::format("truncated \\{}{} escape in string literal", e, std::string(digits, 'X')));
        cp = cp * 16 + static_cast<uint32_t>(h);
      }
      if (cp > 0x10FFFF) fail("illegal Unicode character in string literal");
      unicode::append(out, cp);
      return 2 + digits;
    };
    switch (e) {
      case '\n': return 2;
      case '\\': out += '\\'; return 2;
      case '\'': out += '\''; return 2;
      case '"': out += '"'; return 2;
      case 'a': out += '\a'; return 2;
      case 'b': out += '\b'; return 2;
      case 'f': out += '\f'; return 2;
      case 'n': out += '\n'; return 2;
      case 'r': out += '\r'; return 2;
      case 't': out += '\t'; return 2;
      case 'v': out += '\v'; return 2;
      case 'x': return hex_escape(2);
      case 'u': return hex_escape(4);
      case 'U': return hex_escape(8);
      case 'N': fail("\\N{...} escapes are not supported in string literals");
      default: break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t cp = 0;
      size_t n = 0;
      while (n < 3 && p + 1 + n < source_.size() && source_[p + 1 + n] >= '0' && source_[p + 1 + n] <= '7') {
        cp = cp * 8 + static_cast<uint32_t>(source_[p + 1 + n] - '0');
        ++n;
      }
      unicode::append(out, cp);
      return 1 + n;
    }
    out += '\\';  // unknown escapes stay as written, like Python
    return 1;
  }

  void lex_operator(std::vector<char>& balance) {
    for (std::string_view op : kOperators) {
      if (!starts_with(pos_, op)) continue;
      if (op == "{" || op == "(" || op == "[") {
        balance.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
      } else if (op == "}" || op == ")" || op == "]") {
        if (balance.empty()) fail(fmt::format("unexpected '{}'", op));
        if (balance.back() != op[0]) fail(fmt::format("unexpected '{}', expected '{}'", op, balance.back()));
        balance.pop_back();
      }
      push(TokenType::kOperator, std::string(op));
      advance(pos_ + op.size());
      return;
    }
    const unsigned char c = static_cast<unsigned char>(source_[pos_]);
    fail(c >= 0x20 && c < 0x7F ? fmt::format("unexpected char '{}'", static_cast<char>(c))
                               : fmt::format("unexpected byte 0x{:02x}", c));
  }

  LexerOptions options_;
  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::kData: return "template data / text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kName: return "'" + token.text + "'";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kOperator: return "'" + token.text + "'";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

}  // namespace imp::text::jinja
