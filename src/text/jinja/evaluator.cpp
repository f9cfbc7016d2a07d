#include "text/jinja/evaluator.h"

#include "text/jinja/builtins.h"
#include "text/jinja/operators.h"

namespace imp::text::jinja {
namespace {

// Python's recursion limit is about 1000 frames; a macro call costs jinja2 a few of them.
constexpr int kMaxCallDepth = 300;

class MacroCallable : public Callable {
 public:
  MacroCallable(const MacroStmt* macro, std::shared_ptr<Scope> closure) : macro_(macro), closure_(std::move(closure)) {}
  std::string name() const override { return macro_->name; }
  Value call(Evaluator& evaluator, CallArgs& args) override { return evaluator.call_macro(*macro_, closure_, args); }
  std::string repr() const override { return fmt::format("<Macro '{}'>", macro_->name); }

 private:
  const MacroStmt* macro_;
  std::shared_ptr<Scope> closure_;
};

// What all iterations of one loop share.
struct LoopState {
  std::vector<Value> items;
  int depth = 0;
  const ForStmt* stmt = nullptr;
  std::shared_ptr<Scope> parent;
  std::optional<Value> last_changed;
};

class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<LoopState> state, size_t index) : state_(std::move(state)), index_(index) {}

  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override { return fmt::format("<LoopContext {}/{}>", index_ + 1, state_->items.size()); }
  bool is_callable() const override { return true; }

  Value get_attr(const std::string& name) const override {
    const int64_t i = static_cast<int64_t>(index_);
    const int64_t n = static_cast<int64_t>(state_->items.size());
    if (name == "index") return Value(i + 1);
    if (name == "index0") return Value(i);
    if (name == "revindex") return Value(n - i);
    if (name == "revindex0") return Value(n - i - 1);
    if (name == "first") return Value(i == 0);
    if (name == "last") return Value(i == n - 1);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(int64_t{state_->depth + 1});
    if (name == "depth0") return Value(int64_t{state_->depth});
    if (name == "previtem") return i > 0 ? state_->items[index_ - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem") return i + 1 < n ? state_->items[index_ + 1] : Value::undefined("there is no next item");
    if (name == "cycle" || name == "changed") {
      return Value::callable(std::make_shared<LoopMethod>(state_, index_, name));
    }
    return Value::undefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
  }

  Value call(Evaluator& evaluator, CallArgs& args) override {
    if (!state_->stmt->recursive) {
      raise(ErrorKind::kType, "The loop must have the 'recursive' marker to be called recursively.");
    }
    if (args.positional.size() != 1 || !args.keyword.empty()) raise(ErrorKind::kType, "loop() takes one iterable");
    std::string out;
    evaluator.render_loop(*state_->stmt, args.positional[0], state_->depth + 1, state_->parent, out);
    return Value(std::move(out));
  }

 private:
  class LoopMethod : public Callable {
   public:
    LoopMethod(std::shared_ptr<LoopState> state, size_t index, std::string name)
        : state_(std::move(state)), index_(index), name_(std::move(name)) {}
    std::string name() const override { return name_; }
    Value call(Evaluator&, CallArgs& args) override {
      if (name_ == "cycle") {
        if (args.positional.empty()) raise(ErrorKind::kType, "no items for cycling given");
        return args.positional[index_ % args.positional.size()];
      }
      Value current = Value::tuple(args.positional);
      if (state_->last_changed && py_equal(*state_->last_changed, current)) return Value(false);
      state_->last_changed = current;
      return Value(true);
    }

   private:
    std::shared_ptr<LoopState> state_;
    size_t index_;
    std::string name_;
  };

  std::shared_ptr<LoopState> state_;
  size_t index_;
};

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent.get()) {
    const auto it = scope->vars.find(name);
    if (it != scope->vars.end()) return &it->second;
  }
  return nullptr;
}

Evaluator::Evaluator(std::string source_name, std::shared_ptr<Scope> root)
    : source_name_(std::move(source_name)), scope_(std::move(root)) {}

std::string Evaluator::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

Evaluator::Flow Evaluator::exec(const Body& body, std::string& out) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = exec_stmt(*stmt, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_stmt(const Stmt& stmt, std::string& out) {
  try {
    return exec_inner(stmt, out);
  } catch (const TemplateError& error) {
    if (error.line() > 0) throw;
    throw error.at(stmt.line, source_name_);
  }
}

Evaluator::Flow Evaluator::exec_inner(const Stmt& stmt, std::string& out) {
  switch (stmt.kind) {
    case StmtKind::kOutput: out += static_cast<const OutputStmt&>(stmt).text; return Flow::kNormal;
    case StmtKind::kPrint: out += eval(*static_cast<const PrintStmt&>(stmt).value).str(); return Flow::kNormal;
    case StmtKind::kIf: {
      const auto& node = static_cast<const IfStmt&>(stmt);
      for (const auto& [test, body] : node.branches) {
        if (eval(*test).truthy()) return exec(body, out);
      }
      return exec(node.else_body, out);
    }
    case StmtKind::kFor: {
      const auto& node = static_cast<const ForStmt&>(stmt);
      render_loop(node, eval(*node.iterable), 0, scope_, out);
      return Flow::kNormal;
    }
    case StmtKind::kSet: {
      const auto& node = static_cast<const SetStmt&>(stmt);
      assign(node.target, eval(*node.value));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& node = static_cast<const SetBlockStmt&>(stmt);
      std::string captured;
      exec(node.body, captured);
      Value value(std::move(captured));
      assign(node.target, node.filter ? apply_filter_chain(*node.filter, value) : value);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& node = static_cast<const MacroStmt&>(stmt);
      scope_->vars[node.name] = Value::callable(std::make_shared<MacroCallable>(&node, scope_));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      const auto& node = static_cast<const CallBlockStmt&>(stmt);
      const auto& call = static_cast<const CallExpr&>(*node.call);
      const Value callee = eval(*call.callee);
      CallArgs args = eval_args(call.args);
      args.keyword.emplace_back("caller", Value::callable(std::make_shared<MacroCallable>(node.caller.get(), scope_)));
      out += this->call(callee, args).str();
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const auto& node = static_cast<const FilterBlockStmt&>(stmt);
      std::string captured;
      {
        ScopeGuard guard(*this, std::make_shared<Scope>(scope_));
        exec(node.body, captured);
      }
      out += apply_filter_chain(*node.filter, Value(std::move(captured))).str();
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& node = static_cast<const WithStmt&>(stmt);
      std::vector<Value> values;
      for (const auto& [target, value] : node.assignments) values.push_back(eval(*value));
      ScopeGuard guard(*this, std::make_shared<Scope>(scope_));
      for (size_t i = 0; i < values.size(); ++i) assign(node.assignments[i].first, values[i]);
      exec(node.body, out);
      return Flow::kNormal;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Evaluator::render_loop(const ForStmt& stmt, const Value& iterable, int depth, const std::shared_ptr<Scope>& parent,
                            std::string& out) {
  auto state = std::make_shared<LoopState>();
  state->items = iterate(iterable);
  state->depth = depth;
  state->stmt = &stmt;
  state->parent = parent;
  if (stmt.filter) {
    std::vector<Value> kept;
    for (Value& item : state->items) {
      ScopeGuard guard(*this, std::make_shared<Scope>(parent));
      assign(stmt.target, item);
      if (eval(*stmt.filter).truthy()) kept.push_back(std::move(item));
    }
    state->items = std::move(kept);
  }
  for (size_t i = 0; i < state->items.size(); ++i) {
    ScopeGuard guard(*this, std::make_shared<Scope>(parent));
    scope_->vars["loop"] = Value::object(std::make_shared<LoopObject>(state, i));
    assign(stmt.target, state->items[i]);
    if (exec(stmt.body, out) == Flow::kBreak) break;
  }
  if (state->items.empty() && !stmt.else_body.empty()) {
    ScopeGuard guard(*this, std::make_shared<Scope>(parent));
    exec(stmt.else_body, out);
  }
}

void Evaluator::assign(const Target& target, const Value& value) {
  switch (target.kind) {
    case Target::Kind::kName: scope_->vars[target.name] = value; return;
    case Target::Kind::kNamespaceAttr: {
      const Value* object = scope_->find(target.name);
      if (object == nullptr || !object->is_object()) {
        raise(ErrorKind::kType, "cannot assign attribute on non-namespace object");
      }
      object->as_object().set_attr(target.attr, value);
      return;
    }
    case Target::Kind::kTuple: {
      const std::vector<Value> items = iterate(value);
      const size_t want = target.items.size();
      if (items.size() > want) raise(ErrorKind::kType, "too many values to unpack (expected {})", want);
      if (items.size() < want) {
        raise(ErrorKind::kType, "not enough values to unpack (expected {}, got {})", want, items.size());
      }
      for (size_t i = 0; i < want; ++i) assign(target.items[i], items[i]);
      return;
    }
  }
}

Value Evaluator::eval(const Expr& expr) {
  try {
    return eval_inner(expr);
  } catch (const TemplateError& error) {
    if (error.line() > 0) throw;
    throw error.at(expr.line, source_name_);
  }
}

CallArgs Evaluator::eval_args(const Arguments& args) {
  CallArgs out;
  for (const ExprPtr& arg : args.positional) out.positional.push_back(eval(*arg));
  if (args.star_args) {
    for (Value& item : iterate(eval(*args.star_args))) out.positional.push_back(std::move(item));
  }
  for (const auto& [name, arg] : args.keyword) out.keyword.emplace_back(name, eval(*arg));
  if (args.star_kwargs) {
    const Value mapping = eval(*args.star_kwargs);
    if (!mapping.is_dict()) raise(ErrorKind::kType, "argument after ** must be a mapping, not {}", mapping.type_name());
    for (const auto& [key, value] : mapping.as_dict().items) {
      if (!key.is_string()) raise(ErrorKind::kType, "keywords must be strings");
      out.keyword.emplace_back(key.as_string(), value);
    }
  }
  return out;
}

Value Evaluator::eval_inner(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName: {
      const std::string& name = static_cast<const NameExpr&>(expr).name;
      const Value* value = scope_->find(name);
      return value != nullptr ? *value : Value::undefined(fmt::format("'{}' is undefined", name));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& item : static_cast<const SequenceExpr&>(expr).items) items.push_back(eval(*item));
      return Value::list(std::move(items), expr.kind == ExprKind::kTuple ? SeqKind::kTuple : SeqKind::kList);
    }
    case ExprKind::kDict: {
      DictData dict;
      for (const auto& [key_expr, value_expr] : static_cast<const DictExpr&>(expr).items) {
        Value key = eval(*key_expr);
        if (key.is_dict() || key.is_sequence_kind(SeqKind::kList)) {
          raise(ErrorKind::kType, "unhashable type: '{}'", key.type_name());
        }
        dict.set(std::move(key), eval(*value_expr));
      }
      return Value::dict(std::move(dict));
    }
    case ExprKind::kGetAttr: {
      const auto& node = static_cast<const GetAttrExpr&>(expr);
      return get_attribute(eval(*node.object), node.name);
    }
    case ExprKind::kGetItem: {
      const auto& node = static_cast<const GetItemExpr&>(expr);
      const Value object = eval(*node.object);
      return get_item(object, eval(*node.index));
    }
    case ExprKind::kSlice: {
      const auto& node = static_cast<const SliceExpr&>(expr);
      const Value object = eval(*node.object);
      const Value start = node.start ? eval(*node.start) : Value::none();
      const Value stop = node.stop ? eval(*node.stop) : Value::none();
      const Value step = node.step ? eval(*node.step) : Value::none();
      return slice(object, start, stop, step);
    }
    case ExprKind::kCall: {
      const auto& node = static_cast<const CallExpr&>(expr);
      const Value callee = eval(*node.callee);
      CallArgs args = eval_args(node.args);
      return call(callee, args);
    }
    case ExprKind::kFilter: {
      const auto& node = static_cast<const FilterExpr&>(expr);
      const Value value = eval(*node.value);
      CallArgs args = eval_args(node.args);
      return apply_filter(node.name, value, args);
    }
    case ExprKind::kTest: {
      const auto& node = static_cast<const FilterExpr&>(expr);
      const Value value = eval(*node.value);
      CallArgs args = eval_args(node.args);
      return Value(apply_test(node.name, value, args));
    }
    case ExprKind::kNot: return Value(!eval(*static_cast<const UnaryExpr&>(expr).operand).truthy());
    case ExprKind::kNeg: return negate(eval(*static_cast<const UnaryExpr&>(expr).operand));
    case ExprKind::kPos: return positive(eval(*static_cast<const UnaryExpr&>(expr).operand));
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      const Value left = eval(*node.left);
      return binary_op(node.op, left, eval(*node.right));
    }
    case ExprKind::kAnd: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*node.left);
      return left.truthy() ? eval(*node.right) : left;
    }
    case ExprKind::kOr: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*node.left);
      return left.truthy() ? left : eval(*node.right);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& item : static_cast<const ConcatExpr&>(expr).items) out += eval(*item).str();
      return Value(std::move(out));
    }
    case ExprKind::kCompare: {
      const auto& node = static_cast<const CompareExpr&>(expr);
      Value left = eval(*node.first);
      for (const auto& [op, right_expr] : node.ops) {
        Value right = eval(*right_expr);
        if (!compare_op(op, left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondition: {
      const auto& node = static_cast<const ConditionExpr&>(expr);
      if (eval(*node.test).truthy()) return eval(*node.then_value);
      if (node.else_value) return eval(*node.else_value);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", expr.line));
    }
  }
  raise(ErrorKind::kSyntax, "unknown expression");
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  switch (callee.type()) {
    case Type::kCallable: return callee.callable_ptr()->call(*this, args);
    case Type::kObject: return callee.as_object().call(*this, args);
    case Type::kUndefined: callee.fail_undefined();
    default: raise(ErrorKind::kType, "'{}' object is not callable", callee.type_name());
  }
}

Value Evaluator::apply_filter(const std::string& name, const Value& value, CallArgs& args) {
  const FilterFn filter = find_filter(name);
  if (filter == nullptr) raise_unknown_filter(name);
  return filter(*this, value, args);
}

bool Evaluator::apply_test(const std::string& name, const Value& value, CallArgs& args) {
  const TestFn test = find_test(name);
  if (test == nullptr) raise_unknown_test(name);
  return test(*this, value, args);
}

Value Evaluator::apply_filter_chain(const Expr& chain, const Value& input) {
  const auto& node = static_cast<const FilterExpr&>(chain);
  const Value value = node.value ? apply_filter_chain(*node.value, input) : input;
  CallArgs args = eval_args(node.args);
  return apply_filter(node.name, value, args);
}

Value Evaluator::call_macro(const MacroStmt& macro, const std::shared_ptr<Scope>& closure, CallArgs& args) {
  if (call_depth_ >= kMaxCallDepth)
    raise(ErrorKind::kType, "maximum recursion depth exceeded in macro '{}'", macro.name);
  auto scope = std::make_shared<Scope>(closure);
  const size_t n = macro.params.size();
  std::vector<bool> given(n, false);
  std::vector<Value> extra;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      scope->vars[macro.params[i].name] = args.positional[i];
      given[i] = true;
    } else {
      extra.push_back(args.positional[i]);
    }
  }
  if (!extra.empty() && !macro.uses_varargs) {
    raise(ErrorKind::kType, "macro '{}' takes not more than {} argument(s)", macro.name, n);
  }
  DictData extra_kwargs;
  Value caller = Value::undefined("No caller defined");
  for (auto& [name, value] : args.keyword) {
    size_t index = 0;
    while (index < n && macro.params[index].name != name) ++index;
    if (index < n) {
      if (given[index]) raise(ErrorKind::kType, "macro '{}' got multiple values for argument '{}'", macro.name, name);
      scope->vars[name] = value;
      given[index] = true;
    } else if (name == "caller" && macro.uses_caller) {
      caller = value;
    } else if (macro.uses_kwargs) {
      extra_kwargs.set(Value(name), value);
    } else {
      raise(ErrorKind::kType, "macro '{}' takes no keyword argument '{}'", macro.name, name);
    }
  }
  ScopeGuard guard(*this, scope);
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    const MacroParam& param = macro.params[i];
    scope->vars[param.name] = param.default_value
                                  ? eval(*param.default_value)
                                  : Value::undefined(fmt::format("parameter '{}' was not provided", param.name));
  }
  if (macro.uses_varargs) scope->vars["varargs"] = Value::tuple(std::move(extra));
  if (macro.uses_kwargs) scope->vars["kwargs"] = Value::dict(std::move(extra_kwargs));
  if (macro.uses_caller) scope->vars["caller"] = caller;
  std::string out;
  ++call_depth_;
  try {
    exec(macro.body, out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value(std::move(out));
}

}  // namespace imp::text::jinja
