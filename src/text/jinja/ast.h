// The parsed template: expression and statement nodes, each with the source line it came from.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace imp::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,
  kName,
  kList,
  kTuple,
  kDict,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNeg,
  kPos,
  kBinary,
  kAnd,
  kOr,
  kConcat,
  kCompare,
  kCondition,
};

struct Expr {
  Expr(ExprKind kind, int line) : kind(kind), line(line) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct LiteralExpr : Expr {
  LiteralExpr(Value value, int line) : Expr(ExprKind::kLiteral, line), value(std::move(value)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string name, int line) : Expr(ExprKind::kName, line), name(std::move(name)) {}
  std::string name;
};

// kList and kTuple literals.
struct SequenceExpr : Expr {
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int line) : Expr(ExprKind::kDict, line) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttrExpr : Expr {
  GetAttrExpr(ExprPtr object, std::string name, int line)
      : Expr(ExprKind::kGetAttr, line), object(std::move(object)), name(std::move(name)) {}
  ExprPtr object;
  std::string name;
};

struct GetItemExpr : Expr {
  GetItemExpr(ExprPtr object, ExprPtr index, int line)
      : Expr(ExprKind::kGetItem, line), object(std::move(object)), index(std::move(index)) {}
  ExprPtr object;
  ExprPtr index;
};

// object[start:stop:step]; absent parts are null.
struct SliceExpr : Expr {
  explicit SliceExpr(int line) : Expr(ExprKind::kSlice, line) {}
  ExprPtr object, start, stop, step;
};

struct CallExpr : Expr {
  CallExpr(ExprPtr callee, int line) : Expr(ExprKind::kCall, line), callee(std::move(callee)) {}
  ExprPtr callee;
  Arguments args;
};

// value|name(args) and value is [not] name(args). A filter block has no value (null).
struct FilterExpr : Expr {
  FilterExpr(ExprKind kind, ExprPtr value, std::string name, int line)
      : Expr(kind, line), value(std::move(value)), name(std::move(name)) {}
  ExprPtr value;
  std::string name;
  Arguments args;
};

// kNot, kNeg, kPos.
struct UnaryExpr : Expr {
  UnaryExpr(ExprKind kind, ExprPtr operand, int line) : Expr(kind, line), operand(std::move(operand)) {}
  ExprPtr operand;
};

// Arithmetic (op is "+", "-", "*", "/", "//", "%", "**") and kAnd / kOr (op empty).
struct BinaryExpr : Expr {
  BinaryExpr(ExprKind kind, std::string op, ExprPtr left, ExprPtr right, int line)
      : Expr(kind, line), op(std::move(op)), left(std::move(left)), right(std::move(right)) {}
  std::string op;
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int line) : Expr(ExprKind::kConcat, line) {}
  std::vector<ExprPtr> items;
};

// a < b <= c ...; ops are "==", "!=", "<", "<=", ">", ">=", "in", "notin".
struct CompareExpr : Expr {
  CompareExpr(ExprPtr first, int line) : Expr(ExprKind::kCompare, line), first(std::move(first)) {}
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> ops;
};

// then_value if test else else_value (else_value may be null: undefined).
struct ConditionExpr : Expr {
  explicit ConditionExpr(int line) : Expr(ExprKind::kCondition, line) {}
  ExprPtr test, then_value, else_value;
};

// Assignment targets: a name, a namespace attribute (ns.attr), or a tuple of targets.
struct Target {
  enum class Kind { kName, kNamespaceAttr, kTuple } kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
  int line = 0;
};

enum class StmtKind {
  kOutput,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
};

struct Stmt {
  Stmt(StmtKind kind, int line) : kind(kind), line(line) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};

struct OutputStmt : Stmt {
  OutputStmt(std::string text, int line) : Stmt(StmtKind::kOutput, line), text(std::move(text)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(ExprPtr value, int line) : Stmt(StmtKind::kPrint, line), value(std::move(value)) {}
  ExprPtr value;
};

struct IfStmt : Stmt {
  explicit IfStmt(int line) : Stmt(StmtKind::kIf, line) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(int line) : Stmt(StmtKind::kFor, line) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // for x in y if filter
  bool recursive = false;
  Body body, else_body;
};

struct SetStmt : Stmt {
  explicit SetStmt(int line) : Stmt(StmtKind::kSet, line) {}
  Target target;
  ExprPtr value;
};

// {% set x | filter %}...{% endset %}: filter is a FilterExpr chain whose innermost value is null.
struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int line) : Stmt(StmtKind::kSetBlock, line) {}
  Target target;
  ExprPtr filter;
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required (undefined when not given)
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int line) : Stmt(StmtKind::kMacro, line) {}
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  // Whether the body reads these names, which changes what the macro accepts (as in jinja2).
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

// {% call(params) macro(args) %}body{% endcall %}: body becomes `caller` inside the macro.
struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int line) : Stmt(StmtKind::kCallBlock, line) {}
  ExprPtr call;
  std::shared_ptr<MacroStmt> caller;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int line) : Stmt(StmtKind::kFilterBlock, line) {}
  ExprPtr filter;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int line) : Stmt(StmtKind::kWith, line) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

}  // namespace imp::text::jinja
