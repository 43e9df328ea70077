// Errors of the chat-template interpreter.
//
// Two kinds: mi::Error (the project's error type) carries the final message with the template position
// ("chat template <label> line 3:14: ..."), and ValueError is thrown by value operations and builtins that do
// not know where in the template they run (a TypeError on `'a' + none`, an undefined attribute). The renderer
// catches a ValueError at the innermost expression being evaluated and turns it into an mi::Error naming that
// expression's line:column. Messages follow Python/Jinja2 wording ("TypeError: can only concatenate str (not
// \"NoneType\") to str") so they can be compared with the reference renderer's error text.
#pragma once
#include <stdexcept>
#include <string>

namespace mi::chat {

// 1-based line and column in the template source (column counts bytes).
struct SourcePos {
  int line = 1;
  int column = 1;
};

class ValueError : public std::runtime_error {
 public:
  explicit ValueError(const std::string& message) : std::runtime_error(message) {}
};

template <class... Parts>
[[noreturn]] void value_fail(const Parts&... parts) {
  std::string message;
  ((message += parts), ...);
  throw ValueError(message);
}

}  // namespace mi::chat
