// A parsed Jinja template, rendered with the semantics of jinja2's ImmutableSandboxedEnvironment as
// Hugging Face configures it for chat templates (see ARCHITECTURE.md, text/). Usage:
//   auto tpl = Template::parse(source, "chat_template.jinja");
//   std::string text = tpl.render(variables);   // variables: name -> value
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace imp::text::jinja {

class Template {
 public:
  // Raises TemplateError (kSyntax, kUnsupported) with the line number; `name` prefixes messages.
  static Template parse(std::string_view source, std::string name = "template", const LexerOptions& options = {});

  // Raises TemplateError for runtime failures, including the template's own raise_exception.
  // The parsed template is immutable: renders may run concurrently.
  std::string render(const DictData& variables) const;

  const std::string& name() const { return name_; }

 private:
  Template(std::string name, std::shared_ptr<const Body> body) : name_(std::move(name)), body_(std::move(body)) {}

  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace imp::text::jinja
