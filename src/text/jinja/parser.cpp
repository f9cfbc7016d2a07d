#include "text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string_view>

#include "text/jinja/error.h"
#include "text/jinja/expression_parser.h"

namespace imp::text::jinja {
namespace {

std::string join_names(const Names& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "'" : " or '") + std::string(names[i]) + "'";
  return out;
}

// Statements; expressions come from ExpressionParser.
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != TokenType::kEof) fail(fmt::format("unexpected {}", describe(cur())));
    return body;
  }

 private:
  struct OpenBlock {
    std::string tag;
    int line;
  };

  // Parses until a {% tag %} whose name is in `end_tags`; leaves the stream on that name.
  Body subparse(const Names& end_tags) {
    Body body;
    while (cur().type != TokenType::kEof) {
      const Token& token = cur();
      if (token.type == TokenType::kData) {
        body.push_back(std::make_unique<OutputStmt>(token.text, token.line));
        next();
      } else if (token.type == TokenType::kVariableBegin) {
        const int line = next().line;
        ExprPtr value = parse_tuple(false, true, {}, false);
        expect(TokenType::kVariableEnd, "end of print statement");
        body.push_back(std::make_unique<PrintStmt>(std::move(value), line));
      } else if (token.type == TokenType::kBlockBegin) {
        next();
        if (cur().type == TokenType::kName && contains(end_tags, cur().text)) return body;
        body.push_back(parse_statement(end_tags));
        expect(TokenType::kBlockEnd, "end of statement block");
      } else {
        fail(fmt::format("unexpected {}", describe(token)));
      }
    }
    if (!end_tags.empty()) {
      const OpenBlock& block = open_blocks_.back();
      fail(fmt::format("unexpected end of template: expected {} to close the '{}' block opened on line {}",
                       join_names(end_tags), block.tag, block.line));
    }
    return body;
  }

  // Ends the current tag, parses the body up to one of `end_tags`; with drop_end also consumes that name.
  Body parse_statements(const Names& end_tags, bool drop_end) {
    skip_op(":");
    expect(TokenType::kBlockEnd, "end of statement block");
    Body body = subparse(end_tags);
    if (drop_end) next();
    return body;
  }

  StmtPtr parse_statement(const Names& enclosing_end_tags) {
    if (cur().type != TokenType::kName) fail("tag name expected");
    const std::string tag = cur().text;
    const int line = cur().line;
    static const std::set<std::string_view> kUnsupported = {"block",  "extends", "include",
                                                            "import", "from",    "autoescape"};
    if (kUnsupported.contains(tag)) {
      throw TemplateError(ErrorKind::kUnsupported, fmt::format("the '{}' tag is not supported", tag), line);
    }
    auto with_block = [&](auto parse_fn) {
      open_blocks_.push_back({tag, line});
      next();
      StmtPtr stmt = parse_fn(line);
      open_blocks_.pop_back();
      return stmt;
    };
    if (tag == "if") return with_block([&](int l) { return parse_if(l); });
    if (tag == "for") return with_block([&](int l) { return parse_for(l); });
    if (tag == "set") return with_block([&](int l) { return parse_set(l); });
    if (tag == "macro") return with_block([&](int l) { return parse_macro(l); });
    if (tag == "call") return with_block([&](int l) { return parse_call_block(l); });
    if (tag == "filter") return with_block([&](int l) { return parse_filter_block(l); });
    if (tag == "with") return with_block([&](int l) { return parse_with(l); });
    if (tag == "generation") return with_block([&](int l) { return parse_generation(l); });
    if (tag == "print") {
      next();
      return std::make_unique<PrintStmt>(parse_tuple(false, true, {}, false), line);
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(fmt::format("'{}' outside of a for loop", tag), line);
      next();
      return std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    std::string message = fmt::format("encountered unknown tag '{}'", tag);
    if (!enclosing_end_tags.empty()) {
      message += fmt::format(" (expected {} to close the '{}' block opened on line {})", join_names(enclosing_end_tags),
                             open_blocks_.back().tag, open_blocks_.back().line);
    }
    fail(message, line);
  }

  StmtPtr parse_if(int line) {
    auto stmt = std::make_unique<IfStmt>(line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      stmt->branches.emplace_back(std::move(test), std::move(body));
      const std::string end = next().text;
      if (end == "elif") continue;
      if (end == "else") stmt->else_body = parse_statements({"endif"}, true);
      break;
    }
    return stmt;
  }

  StmtPtr parse_for(int line) {
    auto stmt = std::make_unique<ForStmt>(line);
    stmt->target = parse_target(true, {"in"}, false);
    if (!skip_name("in")) fail(fmt::format("expected 'in', got {}", describe(cur())));
    stmt->iterable = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) stmt->filter = parse_expression(true);
    stmt->recursive = skip_name("recursive");
    ++loop_depth_;
    stmt->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") stmt->else_body = parse_statements({"endfor"}, true);
    return stmt;
  }

  StmtPtr parse_set(int line) {
    Target target = parse_target(true, {}, true);
    if (skip_op("=")) {
      auto stmt = std::make_unique<SetStmt>(line);
      stmt->target = std::move(target);
      stmt->value = parse_tuple(false, true, {}, false);
      return stmt;
    }
    auto stmt = std::make_unique<SetBlockStmt>(line);
    stmt->target = std::move(target);
    if (at_op("|")) stmt->filter = parse_filter(nullptr, false);
    stmt->body = parse_statements({"endset"}, true);
    return stmt;
  }

  void parse_signature(MacroStmt& macro) {
    expect_op("(");
    while (!at_op(")")) {
      if (!macro.params.empty()) expect_op(",");
      if (at_op(")")) break;
      MacroParam param;
      param.name = expect_name();
      if (skip_op("=")) {
        param.default_value = parse_expression(true);
      } else if (std::any_of(macro.params.begin(), macro.params.end(),
                             [](const MacroParam& p) { return p.default_value != nullptr; })) {
        fail("non-default argument follows default argument");
      }
      macro.params.push_back(std::move(param));
    }
    expect_op(")");
  }

  // Parses a macro body while recording which of varargs/kwargs/caller it reads.
  Body parse_macro_body(MacroStmt& macro, const Names& end_tags) {
    name_sinks_.emplace_back();
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;
    Body body = parse_statements(end_tags, true);
    loop_depth_ = saved_depth;
    const std::set<std::string> used = std::move(name_sinks_.back());
    name_sinks_.pop_back();
    macro.uses_varargs = used.contains("varargs");
    macro.uses_kwargs = used.contains("kwargs");
    macro.uses_caller = used.contains("caller");
    return body;
  }

  StmtPtr parse_macro(int line) {
    auto stmt = std::make_unique<MacroStmt>(line);
    stmt->name = expect_name();
    parse_signature(*stmt);
    stmt->body = parse_macro_body(*stmt, {"endmacro"});
    return stmt;
  }

  StmtPtr parse_call_block(int line) {
    auto stmt = std::make_unique<CallBlockStmt>(line);
    stmt->caller = std::make_shared<MacroStmt>(line);
    stmt->caller->name = "caller";
    if (at_op("(")) parse_signature(*stmt->caller);
    stmt->call = parse_expression(true);
    if (stmt->call->kind != ExprKind::kCall) fail("expected a call after {% call %}", line);
    stmt->caller->body = parse_macro_body(*stmt->caller, {"endcall"});
    return stmt;
  }

  StmtPtr parse_filter_block(int line) {
    auto stmt = std::make_unique<FilterBlockStmt>(line);
    stmt->filter = parse_filter(nullptr, true);
    stmt->body = parse_statements({"endfilter"}, true);
    return stmt;
  }

  StmtPtr parse_with(int line) {
    auto stmt = std::make_unique<WithStmt>(line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!stmt->assignments.empty()) expect_op(",");
      Target target = parse_target(true, {}, false);
      expect_op("=");
      stmt->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    stmt->body = parse_statements({"endwith"}, true);
    return stmt;
  }

  // HF's AssistantTracker tag: renders its body in a scope of its own (a caller block in jinja2).
  StmtPtr parse_generation(int line) {
    auto stmt = std::make_unique<WithStmt>(line);
    stmt->body = parse_statements({"endgeneration"}, true);
    return stmt;
  }

  int loop_depth_ = 0;
  std::vector<OpenBlock> open_blocks_;
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace imp::text::jinja
