// Methods callable on template values, as Jinja2's ImmutableSandboxedEnvironment exposes Python's:
// str (startswith, endswith, split, rsplit, strip, lstrip, rstrip, upper, lower, title, capitalize, replace,
// find, rfind, count, join, format, splitlines, is*), dict (items, keys, values, get, copy) and list
// (index, count). Mutating methods (list.append, dict.update, ...) are refused as the sandbox refuses them.
#pragma once
#include <optional>
#include <string>

#include "chat/template_value.h"

namespace mi::chat {

// The bound method `self.name`: a Callable; an Undefined whose use raises SecurityError for a mutating method;
// nullopt when `self` has no method of that name.
std::optional<Value> get_method(const Value& self, const std::string& name);

}  // namespace mi::chat
