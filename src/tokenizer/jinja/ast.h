// The syntax tree of a parsed template: expressions and statements, each with its source line.
// Spec: https://jinja.palletsprojects.com/en/3.1.x/templates/ (expressions, control structures).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace peregrine::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// Arguments of a call, filter or test: positional, then keyword (name=value).
struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Literal { Value value; };
struct Name { std::string name; };
struct ListLiteral { std::vector<ExprPtr> items; };  // [a, b] and tuples (a, b)
struct DictLiteral { std::vector<std::pair<ExprPtr, ExprPtr>> items; };
struct GetAttr { ExprPtr object; std::string attr; };        // x.attr
struct GetItem { ExprPtr object; ExprPtr index; };           // x[i]
struct SliceExpr { ExprPtr object, start, stop, step; };      // x[start:stop:step], each may be null
struct Call { ExprPtr callee; Args args; };                   // f(...), x.method(...)
struct FilterExpr { ExprPtr value; std::string name; Args args; };             // x | name(args)
struct TestExpr { ExprPtr value; std::string name; Args args; bool negated; };  // x is [not] name(args)
enum class UnaryOp { kNot, kNeg, kPos };
struct Unary { UnaryOp op; ExprPtr operand; };
/// Binary operators, by Jinja's spelling: + - * / // % ** ~ == != < <= > >= in "not in" and or.
struct Binary { std::string op; ExprPtr lhs, rhs; };
struct Conditional { ExprPtr then, condition, otherwise; };  // then if condition else otherwise (otherwise may be null)

struct Expr {
  int line = 1;
  std::variant<Literal, Name, ListLiteral, DictLiteral, GetAttr, GetItem, SliceExpr, Call, FilterExpr, TestExpr, Unary,
               Binary, Conditional>
      node;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct TextStmt { std::string text; };
struct OutputStmt { ExprPtr expr; };  // {{ expr }}
struct IfStmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif conditions and bodies
  Body otherwise;
};
struct ForStmt {
  std::vector<std::string> targets;  // `for a, b in ...` unpacks each item
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`, may be null
  Body body, otherwise;
};
/// `{% set a = v %}`, `{% set a, b = v %}`, `{% set ns.attr = v %}`, `{% set a %}body{% endset %}`.
struct SetStmt {
  std::vector<std::string> targets;
  std::string attr;  // non-empty: assigns targets[0].attr (a namespace)
  ExprPtr value;     // null: the rendered `body`
  Body body;
};
struct LoopControlStmt { bool is_break; };  // {% break %} / {% continue %} (jinja2.ext.loopcontrols)
/// `{% filter name(args) %}body{% endfilter %}` and transformers' `{% generation %}` (body as is).
struct FilterBlockStmt {
  std::string name;  // empty: the body unchanged
  Args args;
  Body body;
};

/// `{% macro name(a, b=default) %}body{% endmacro %}`: defines `name`, a function whose call
/// renders the body with the parameters bound (defaults may be null: required in name only).
struct MacroStmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;
  Body body;
};

struct Stmt {
  int line = 1;
  std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, LoopControlStmt, FilterBlockStmt, MacroStmt> node;
};

}  // namespace peregrine::jinja
