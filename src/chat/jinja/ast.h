// The Jinja syntax tree: expressions and statements, as parser.cpp builds them and eval_*.cpp walk them.
// Immutable after parsing; a parsed Template may be rendered from many threads at once.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace preface::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Literal,  // literal
  Name,     // name
  List,     // [args...] (tuples too)
  Dict,     // {args[2i]: args[2i+1]}
  Attr,     // args[0].name
  Item,     // args[0][args[1]]
  Slice,    // args[0][args[1]:args[2]:args[3]] (a null child is an omitted bound)
  Call,     // args[0](args[1..], kwargs)
  Filter,   // args[0] | name(args[1..], kwargs)
  Test,     // args[0] is [not: negate] name(args[1..], kwargs)
  Neg,      // -args[0]
  Pos,      // +args[0]
  Not,      // not args[0]
  And,      // args[0] and args[1]
  Or,       // args[0] or args[1]
  Binary,   // args[0] name args[1]: + - * / // % ** ~
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  Cond,     // args[1] if args[0] else args[2] (args[2] may be null: Undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  std::string name;
  Value literal;
  bool negate = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind {
  Text,        // text
  Output,      // {{ expr }}
  If,          // branches: (cond, body)...; else_body
  For,         // for targets in expr [if cond] ... [else else_body]
  Set,         // set targets = expr | set target.attr = expr (attr non-empty)
  SetBlock,    // set targets[0] %}body{% endset (filter: optional filter expression on a placeholder)
  Macro,       // macro name(params) body
  CallBlock,   // call(params) expr  body
  FilterBlock, // filter expr(with a null args[0]) body
  Break,
  Continue,
  Scope,       // generation / endgeneration and other bodies rendered unchanged
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Node {
  NodeKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
  bool recursive = false;
};

}  // namespace preface::chat::jinja
