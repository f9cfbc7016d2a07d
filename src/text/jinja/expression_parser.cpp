#include "text/jinja/expression_parser.h"

namespace imp::text::jinja {

// ---- assignment targets -------------------------------------------------------------------
bool ExpressionParser::at_tuple_end(const Names& extra_end) const {
  const Token& token = cur();
  if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd || token.type == TokenType::kEof) {
    return true;
  }
  if (token.is_operator(")")) return true;
  return token.type == TokenType::kName && contains(extra_end, token.text);
}

Target ExpressionParser::parse_target(bool with_tuple, const Names& extra_end, bool with_namespace) {
  if (!with_tuple) return parse_target_primary(with_namespace);
  Target tuple;
  tuple.kind = Target::Kind::kTuple;
  tuple.line = cur().line;
  bool is_tuple = false;
  while (true) {
    if (!tuple.items.empty()) expect_op(",");
    if (at_tuple_end(extra_end)) break;
    tuple.items.push_back(parse_target_primary(with_namespace));
    if (!at_op(",")) break;
    is_tuple = true;
  }
  if (tuple.items.empty()) fail(fmt::format("expected an assignment target, got {}", describe(cur())));
  if (!is_tuple) return std::move(tuple.items.front());
  return tuple;
}

Target ExpressionParser::parse_target_primary(bool with_namespace) {
  Target target;
  target.line = cur().line;
  if (cur().type == TokenType::kName) {
    static const std::set<std::string_view> kConstants = {"true", "false", "none", "True", "False", "None"};
    if (kConstants.contains(cur().text)) fail("can't assign to a constant");
    target.name = next().text;
    if (with_namespace && at_op(".")) {
      next();
      target.kind = Target::Kind::kNamespaceAttr;
      target.attr = expect_name();
    }
    return target;
  }
  if (skip_op("(")) {
    Target inner = parse_target(true, {}, with_namespace);
    expect_op(")");
    return inner;
  }
  fail(fmt::format("can't assign to {}", describe(cur())));
}

// ---- expressions --------------------------------------------------------------------------
ExprPtr ExpressionParser::parse_tuple(bool simplified, bool with_condexpr, const Names& extra_end,
                                      bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (at_tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (!at_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!explicit_parentheses) fail(fmt::format("expected an expression, got {}", describe(cur())));
  }
  auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, line);
  tuple->items = std::move(items);
  return tuple;
}

ExprPtr ExpressionParser::parse_condition() {
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    const int line = next().line;
    auto cond = std::make_unique<ConditionExpr>(line);
    cond->then_value = std::move(expr);
    cond->test = parse_or();
    if (skip_name("else")) cond->else_value = parse_condition();
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    const int line = next().line;
    left = std::make_unique<BinaryExpr>(ExprKind::kOr, "", std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    const int line = next().line;
    left = std::make_unique<BinaryExpr>(ExprKind::kAnd, "", std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    const int line = next().line;
    return std::make_unique<UnaryExpr>(ExprKind::kNot, parse_not(), line);
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> ops;
  while (true) {
    const Token& token = cur();
    if (token.type == TokenType::kOperator && (token.text == "==" || token.text == "!=" || token.text == "<" ||
                                               token.text == "<=" || token.text == ">" || token.text == ">=")) {
      const std::string op = next().text;
      ops.emplace_back(op, parse_math1());
    } else if (skip_name("in")) {
      ops.emplace_back("in", parse_math1());
    } else if (at_name("not") && look().is_name("in")) {
      next();
      next();
      ops.emplace_back("notin", parse_math1());
    } else {
      break;
    }
  }
  if (ops.empty()) return first;
  auto compare = std::make_unique<CompareExpr>(std::move(first), line);
  compare->ops = std::move(ops);
  return compare;
}

ExprPtr ExpressionParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    const Token& op = next();
    left = std::make_unique<BinaryExpr>(ExprKind::kBinary, op.text, std::move(left), parse_concat(), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!at_op("~")) return first;
  auto concat = std::make_unique<ConcatExpr>(line);
  concat->items.push_back(std::move(first));
  while (skip_op("~")) concat->items.push_back(parse_math2());
  return concat;
}

ExprPtr ExpressionParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token& op = next();
    left = std::make_unique<BinaryExpr>(ExprKind::kBinary, op.text, std::move(left), parse_pow(), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_op("**")) {
    const Token& op = next();
    left = std::make_unique<BinaryExpr>(ExprKind::kBinary, "**", std::move(left), parse_unary(true), op.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  const int line = cur().line;
  ExprPtr node;
  if (skip_op("-")) {
    node = std::make_unique<UnaryExpr>(ExprKind::kNeg, parse_unary(false), line);
  } else if (skip_op("+")) {
    node = std::make_unique<UnaryExpr>(ExprKind::kPos, parse_unary(false), line);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& token = cur();
  const int line = token.line;
  switch (token.type) {
    case TokenType::kName: {
      const std::string name = next().text;
      if (name == "true" || name == "True") return std::make_unique<LiteralExpr>(Value(true), line);
      if (name == "false" || name == "False") return std::make_unique<LiteralExpr>(Value(false), line);
      if (name == "none" || name == "None") return std::make_unique<LiteralExpr>(Value::none(), line);
      for (auto& sink : name_sinks_) sink.insert(name);
      return std::make_unique<NameExpr>(name, line);
    }
    case TokenType::kString: {
      std::string text;
      while (cur().type == TokenType::kString) text += next().text;  // adjacent literals join
      return std::make_unique<LiteralExpr>(Value(std::move(text)), line);
    }
    case TokenType::kInteger: return std::make_unique<LiteralExpr>(Value(next().integer), line);
    case TokenType::kFloat: return std::make_unique<LiteralExpr>(Value(next().number), line);
    default: break;
  }
  if (skip_op("(")) {
    ExprPtr inner = parse_tuple(false, true, {}, true);
    expect_op(")");
    return inner;
  }
  if (skip_op("[")) {
    auto list = std::make_unique<SequenceExpr>(ExprKind::kList, line);
    while (!at_op("]")) {
      if (!list->items.empty()) expect_op(",");
      if (at_op("]")) break;
      list->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return list;
  }
  if (skip_op("{")) {
    auto dict = std::make_unique<DictExpr>(line);
    while (!at_op("}")) {
      if (!dict->items.empty()) expect_op(",");
      if (at_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      dict->items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return dict;
  }
  fail(fmt::format("unexpected {}", describe(token)));
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  const Token& token = next();
  const int line = token.line;
  if (token.is_operator(".")) {
    const Token& attr = next();
    if (attr.type == TokenType::kName) return std::make_unique<GetAttrExpr>(std::move(node), attr.text, line);
    if (attr.type != TokenType::kInteger) fail("expected name or number after '.'", attr.line);
    return std::make_unique<GetItemExpr>(std::move(node), std::make_unique<LiteralExpr>(Value(attr.integer), line),
                                         line);
  }
  std::vector<ExprPtr> args;
  while (!at_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.size() == 1) {
    if (args.front()->kind == ExprKind::kSlice) {
      static_cast<SliceExpr&>(*args.front()).object = std::move(node);
      return std::move(args.front());
    }
    return std::make_unique<GetItemExpr>(std::move(node), std::move(args.front()), line);
  }
  for (const ExprPtr& arg : args) {
    if (arg->kind == ExprKind::kSlice) {
      throw TemplateError(ErrorKind::kUnsupported, "multi-dimensional slices are not supported", line);
    }
  }
  auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, line);
  tuple->items = std::move(args);
  return std::make_unique<GetItemExpr>(std::move(node), std::move(tuple), line);
}

// One subscript: an expression, or a slice start:stop:step (returned as a SliceExpr without object).
ExprPtr ExpressionParser::parse_subscribed() {
  const int line = cur().line;
  auto slice = std::make_unique<SliceExpr>(line);
  if (!skip_op(":")) {
    ExprPtr start = parse_expression(true);
    if (!skip_op(":")) return start;
    slice->start = std::move(start);
  }
  if (!at_op(":") && !at_op("]") && !at_op(",")) slice->stop = parse_expression(true);
  if (skip_op(":")) {
    if (!at_op("]") && !at_op(",")) slice->step = parse_expression(true);
  }
  return slice;
}

Arguments ExpressionParser::parse_call_args() {
  const int line = cur().line;
  expect_op("(");
  Arguments args;
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", line);
  };
  while (!at_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (at_op(")")) break;
    }
    if (skip_op("*")) {
      ensure(!args.star_args && !args.star_kwargs);
      args.star_args = parse_expression(true);
    } else if (skip_op("**")) {
      ensure(!args.star_kwargs);
      args.star_kwargs = parse_expression(true);
    } else if (cur().type == TokenType::kName && look().is_operator("=")) {
      ensure(!args.star_kwargs);
      std::string key = next().text;
      next();
      args.keyword.emplace_back(std::move(key), parse_expression(true));
    } else {
      ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
      args.positional.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
  return args;
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  auto call = std::make_unique<CallExpr>(std::move(callee), cur().line);
  call->args = parse_call_args();
  return call;
}

std::string ExpressionParser::parse_dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  return name;
}

ExprPtr ExpressionParser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_op("|") || start_inline) {
    if (!start_inline) next();
    const int line = cur().line;
    auto filter = std::make_unique<FilterExpr>(ExprKind::kFilter, std::move(node), parse_dotted_name(), line);
    if (at_op("(")) filter->args = parse_call_args();
    node = std::move(filter);
    start_inline = false;
  }
  return node;
}

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
  const int line = next().line;
  const bool negated = skip_name("not");
  auto test = std::make_unique<FilterExpr>(ExprKind::kTest, std::move(node), parse_dotted_name(), line);
  const Token& token = cur();
  const bool bare_argument =
      (token.type == TokenType::kName || token.type == TokenType::kString || token.type == TokenType::kInteger ||
       token.type == TokenType::kFloat || token.is_operator("[") || token.is_operator("{")) &&
      !token.is_name("else") && !token.is_name("or") && !token.is_name("and");
  if (at_op("(")) {
    test->args = parse_call_args();
  } else if (bare_argument) {
    if (token.is_name("is")) fail("you cannot chain multiple tests with is");
    test->args.positional.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return test;
  return std::make_unique<UnaryExpr>(ExprKind::kNot, std::move(test), line);
}

}  // namespace imp::text::jinja
