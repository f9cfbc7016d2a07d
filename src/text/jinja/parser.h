// Builds the statement tree from tokens, following jinja2's grammar and operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + < filters, tests, calls,
// attribute access). Tags outside the supported set fail here, with their line.
#pragma once

#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace imp::text::jinja {

// Raises TemplateError (kSyntax or kUnsupported) naming the line.
Body parse(std::vector<Token> tokens);

}  // namespace imp::text::jinja
