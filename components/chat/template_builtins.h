// Jinja2's builtin filters and tests (template designer docs, "List of Builtin Filters/Tests") as chat
// templates use them, Hugging Face's overrides (tojson = json.dumps keeping non-ASCII, raise_exception,
// strftime_now), and the global functions range(), namespace() and dict().
//
// Unknown filter or test names are rejected when the template is parsed (Jinja2 rejects them at compile
// time too), so a typo never renders a silently different prompt.
#pragma once
#include <string>
#include <string_view>

#include "chat/template_value.h"

namespace mi::chat {

bool has_filter(std::string_view name);
bool has_test(std::string_view name);

// `input | name(args)`. Throws ValueError with Python/Jinja2 wording on bad input.
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
// `input is name(args)`.
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);

// The global functions every render sees: range, namespace, dict, raise_exception, strftime_now.
Dict builtin_globals();

}  // namespace mi::chat
