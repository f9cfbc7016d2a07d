// Expressions and assignment targets, following jinja2's grammar and operator precedence:
// or < and < not < comparisons (==, in, ...) < + - < ~ < * / // % < ** < unary - + < postfix
// (attribute, subscript, call) < filters and tests.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/token_stream.h"

namespace imp::text::jinja {

class ExpressionParser : public TokenStream {
 public:
  using TokenStream::TokenStream;

 protected:
  // Whether the tuple being parsed ends here (end of tag, ")", or one of `extra_end`).
  bool at_tuple_end(const Names& extra_end) const;
  Target parse_target(bool with_tuple, const Names& extra_end, bool with_namespace);
  Target parse_target_primary(bool with_namespace);
  // An expression, or a tuple when items are separated by commas (`{{ a, b }}`, `for x in a, b`).
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const Names& extra_end, bool explicit_parentheses);
  ExprPtr parse_condition();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  // One subscript: an expression, or start:stop:step as a SliceExpr without its object.
  ExprPtr parse_subscribed();
  Arguments parse_call_args();
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condition() : parse_or(); }
};

}  // namespace imp::text::jinja
