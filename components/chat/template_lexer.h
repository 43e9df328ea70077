// Lexer of the Jinja2 subset used by chat templates, configured as Hugging Face configures Jinja2:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, default delimiters.
//
// Whitespace control (Jinja2 template designer docs, "Whitespace Control"), applied while lexing so that the
// parser sees final text:
//   - `{%-`, `{{-`, `{#-` remove all whitespace (newlines too) before the tag; `-%}`, `-}}`, `-#}` after it.
//   - lstrip_blocks: spaces/tabs between the start of a line and a `{%` or `{#` are removed (not before `{{`);
//     `{%+` disables this for one tag.
//   - trim_blocks: the first newline after `%}` or `#}` is removed; `+%}` disables this for one tag.
//   - newlines are normalized to \n and one trailing newline of the template is dropped.
// Comments produce no tokens. Inside a tag, the closing delimiter only counts outside (), [] and {}.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/template_error.h"
#include "common/error.h"

namespace mi::chat {

// A syntax or runtime error located in the template; the message starts with "line L:C: ".
class TemplateError : public mi::Error {
 public:
  TemplateError(SourcePos pos, const std::string& message);
  SourcePos pos;
};

enum class TokenKind {
  kData,           // literal text between tags (already whitespace-controlled)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier or keyword
  kString,         // string literal, text = unescaped value
  kInteger,        // text = digits (underscores removed)
  kFloat,          // text = literal (underscores removed)
  kOperator,       // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,            // end of template
};

struct Token {
  TokenKind kind;
  std::string text;
  SourcePos pos;
};

std::vector<Token> tokenize(std::string_view source);

}  // namespace mi::chat
