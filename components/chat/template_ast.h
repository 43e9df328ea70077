// Syntax tree of a parsed chat template. Plain structs: an expression or statement node has a kind, the
// position of its first token (for error messages) and kind-specific children. Built by template_parser,
// walked by template_renderer.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/template_error.h"
#include "chat/template_value.h"

namespace mi::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,      // value
  kName,         // name
  kList,         // items (is_tuple: `(a, b)` or `a, b`)
  kDict,         // keys/values
  kAttribute,    // object.name
  kSubscript,    // object[index]
  kSlice,        // object[start:stop:step], any of the three may be null
  kCall,         // callee(args, name=kwargs)
  kFilter,       // object | name(args)
  kTest,         // object is [not] name(args)
  kUnary,        // op operand: "not", "-", "+"
  kBinary,       // left op right: + - * / // % ** ~ and or
  kCompare,      // first (op operand)+ : == != < <= > >= in "not in", chained like Python
  kConditional,  // then if condition else otherwise (otherwise may be null = undefined)
};

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value value;                                         // kLiteral
  std::string name;                                    // kName, kAttribute, kFilter, kTest; op for kUnary/kBinary
  std::vector<ExprPtr> items;                          // kList items, kDict keys, kCall/kFilter/kTest args
  std::vector<ExprPtr> values;                         // kDict values
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall/kFilter/kTest keyword arguments
  std::vector<std::string> ops;                        // kCompare operators, one per `operands`
  std::vector<ExprPtr> operands;                       // kCompare right-hand sides
  ExprPtr object, index, start, stop, step;            // kAttribute/kSubscript/kSlice/kFilter/kTest/kCall(callee)
  ExprPtr left, right;                                 // kBinary, kUnary (right), kCompare (left)
  ExprPtr condition, then, otherwise;                  // kConditional
  bool is_tuple = false;                               // kList
  bool negated = false;                                // kTest: `is not`
  int depth = 1;                                       // height of this subtree (the parser bounds it)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // conditions[i] -> bodies[i]; else_body
  kFor,          // for targets in expr [if condition]: body [else else_body]
  kSet,          // set targets = expr   |   set namespace.attribute = expr
  kSetBlock,     // set name %}body{% endset
  kMacro,        // macro name(params=defaults) body
  kBreak,
  kContinue,
  kWith,         // with name = expr, ... : body (a new scope)
  kFilterBlock,  // filter name(args) body endfilter: body's output through a filter
  kGeneration,   // Hugging Face's {% generation %} marker: renders its body unchanged
};

// Where `set` and `for` assign: one name, several names (tuple unpacking), or `namespace.attribute`.
struct AssignTarget {
  std::vector<std::string> names;
  bool unpack = false;     // `a, b` / `(a, b)`
  std::string attribute;   // non-empty: names[0] is a namespace and this attribute is set
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind;
  SourcePos pos;
  std::string text;                    // kText; kSetBlock/kMacro name
  ExprPtr expr;                        // kOutput, kFor iterable, kSet value, kFilterBlock filter (kFilter, object null)
  ExprPtr condition;                   // kFor inline `if`
  AssignTarget target;                 // kFor, kSet
  std::vector<ExprPtr> conditions;     // kIf
  std::vector<Body> bodies;            // kIf branches
  Body body;                           // kFor, kSetBlock, kMacro, kWith, kFilterBlock, kGeneration
  Body else_body;                      // kIf, kFor
  std::vector<MacroParam> params;      // kMacro
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kWith
};

}  // namespace mi::chat
