// Evaluates a parsed chat template (template_ast) against variables and produces the rendered text.
//
// Scoping follows Jinja2: each for-loop iteration, macro call and with-block gets a fresh child scope, so a
// `{% set %}` inside a loop body is gone at the next iteration and after the loop (templates carry state
// across iterations with namespace()); if-blocks do not open scopes. Runaway templates are stopped by
// RenderLimits (evaluation steps, nesting depth, output size) with a TemplateError instead of hanging or
// exhausting the stack.
#pragma once
#include <cstdint>
#include <string>

#include "chat/template_ast.h"
#include "chat/template_operators.h"
#include "chat/template_value.h"

namespace mi::chat {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // rendered text (and macro / set-block output)
  uint64_t max_steps = 50'000'000;             // statements, expressions and loop iterations evaluated
  int max_depth = 300;                         // nested evaluation: expressions, blocks, macro calls
  ValueLimits values;                          // largest string / list a template may build
};

// Throws TemplateError ("line L:C: <Python-style error>") when rendering fails.
std::string render_template(const Body& body, const Dict& variables, const RenderLimits& limits);

}  // namespace mi::chat
