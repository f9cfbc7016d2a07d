// Walks the statement tree and renders output with jinja2's runtime semantics: a scope per for-loop
// iteration and per macro call (so `set` inside a loop does not leak; namespace() is the way out),
// Python truthiness and operators, macros closing over the scope they were defined in.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja/ast.h"

namespace imp::text::jinja {

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent(std::move(parent)) {}
  const Value* find(const std::string& name) const;

  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};

class Evaluator {
 public:
  Evaluator(std::string source_name, std::shared_ptr<Scope> root);

  std::string render(const Body& body);
  Value eval(const Expr& expr);
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
  bool apply_test(const std::string& name, const Value& value, CallArgs& args);
  // Runs a macro body in a fresh scope under `closure`; `caller` is the {% call %} body, if any.
  Value call_macro(const MacroStmt& macro, const std::shared_ptr<Scope>& closure, CallArgs& args);
  // Renders a for loop over `iterable` (recursive loops call this again through `loop(...)`).
  void render_loop(const ForStmt& stmt, const Value& iterable, int depth, const std::shared_ptr<Scope>& parent,
                   std::string& out);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  class ScopeGuard {
   public:
    ScopeGuard(Evaluator& evaluator, std::shared_ptr<Scope> scope) : evaluator_(evaluator), saved_(evaluator.scope_) {
      evaluator.scope_ = std::move(scope);
    }
    ~ScopeGuard() { evaluator_.scope_ = std::move(saved_); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    Evaluator& evaluator_;
    std::shared_ptr<Scope> saved_;
  };

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& stmt, std::string& out);
  Flow exec_inner(const Stmt& stmt, std::string& out);
  Value eval_inner(const Expr& expr);
  CallArgs eval_args(const Arguments& args);
  // A filter chain whose innermost value is `input` (filter blocks, {% set x | f %}).
  Value apply_filter_chain(const Expr& chain, const Value& input);
  void assign(const Target& target, const Value& value);

  std::string source_name_;
  std::shared_ptr<Scope> scope_;
  int call_depth_ = 0;
};

}  // namespace imp::text::jinja
