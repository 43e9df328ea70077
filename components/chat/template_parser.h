// Parser of the Jinja2 subset chat templates use: tokens (template_lexer) -> syntax tree (template_ast).
//
// Grammar and operator precedence follow Jinja2's parser (template designer docs, "Expressions"), lowest
// first: `a if c else b`, or, and, not, comparisons (== != < <= > >= in, not in; chained), + -, ~, * / // %,
// **, unary - +, then postfix (.attr, [index], [a:b:c], call), filters (|f) and tests (is [not] t).
// Statements: if/elif/else, for (tuple targets, inline if, else, loop), set (incl. ns.attr and block set),
// macro, break/continue, with, filter blocks, Hugging Face's generation block. Everything else (include,
// import, extends, block, call, raw, ...) is rejected with a TemplateError naming the tag and its line:column.
//
// Nesting is bounded (statements and expression trees) so a hostile template cannot exhaust the stack.
#pragma once
#include <string_view>

#include "chat/template_ast.h"

namespace mi::chat {

inline constexpr int kMaxStatementNesting = 64;
inline constexpr int kMaxExpressionDepth = 128;

// Throws TemplateError ("line L:C: ...") on a syntax error or an unsupported construct.
Body parse_template(std::string_view source);

}  // namespace mi::chat
