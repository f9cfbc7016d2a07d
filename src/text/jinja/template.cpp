#include "text/jinja/template.h"

#include "text/jinja/builtins.h"
#include "text/jinja/evaluator.h"
#include "text/jinja/parser.h"

namespace imp::text::jinja {

Template Template::parse(std::string_view source, std::string name, const LexerOptions& options) {
  try {
    auto body = std::make_shared<const Body>(jinja::parse(tokenize(source, options)));
    return Template(std::move(name), std::move(body));
  } catch (const TemplateError& error) {
    throw error.at(error.line(), name);
  }
}

std::string Template::render(const DictData& variables) const {
  // Globals, then the caller's variables, then the template's own top-level scope.
  auto globals = std::make_shared<Scope>();
  DictData builtin;
  add_globals(builtin);
  for (auto& [key, value] : builtin.items) globals->vars[key.as_string()] = value;
  auto context = std::make_shared<Scope>(globals);
  for (const auto& [key, value] : variables.items) {
    if (!key.is_string()) raise(ErrorKind::kType, "template variable names must be strings");
    context->vars[key.as_string()] = value;
  }
  Evaluator evaluator(name_, std::make_shared<Scope>(context));
  return evaluator.render(*body_);
}

}  // namespace imp::text::jinja
