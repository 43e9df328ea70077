// Python/Jinja2 semantics of the expression operators on template values: arithmetic, `~`, comparisons,
// `in`, attribute and item access (Jinja2's sandboxed getattr/getitem), slicing, iteration and len().
// Failures throw ValueError with Python's wording; the renderer adds the template position.
#pragma once
#include <string>
#include <vector>

#include "chat/template_value.h"

namespace mi::chat {

// Size bounds for values built while rendering, so a hostile template (string doubling, `'a' * 10**9`,
// range(10**9)) fails with an error instead of exhausting memory. The renderer installs the bounds of its
// RenderLimits for the duration of a render (per thread, see ScopedValueLimits); these are the defaults.
struct ValueLimits {
  size_t max_string_bytes = size_t{64} << 20;
  size_t max_list_items = size_t{1} << 22;
};
const ValueLimits& value_limits();
class ScopedValueLimits {
 public:
  explicit ScopedValueLimits(const ValueLimits& limits);
  ~ScopedValueLimits();
  ScopedValueLimits(const ScopedValueLimits&) = delete;
  ScopedValueLimits& operator=(const ScopedValueLimits&) = delete;

 private:
  ValueLimits saved_;
};
void check_string_size(size_t bytes);
void check_list_size(size_t items);

// op: + - * / // % **
Value binary_operation(const std::string& op, const Value& left, const Value& right);
Value concat_operation(const Value& left, const Value& right);  // `~`
Value negate(const Value& operand);                               // unary -
Value unary_plus(const Value& operand);
// op: == != < <= > >= in "not in"
bool compare(const std::string& op, const Value& left, const Value& right);
bool contains(const Value& container, const Value& item);  // Python `item in container`

// `obj.name`: dict key or safe method, string/list method, namespace attribute; missing -> Undefined whose
// hint is Jinja2's message ("'dict object' has no attribute 'x'"). obj undefined -> UndefinedError.
Value get_attribute(const Value& object, const std::string& name);
// `obj[key]`: item first, then (string keys) attribute, like Jinja2's getitem.
Value get_item(const Value& object, const Value& key);
// `obj[start:stop:step]` on lists, tuples and strings (code points); null Values mean "omitted".
Value get_slice(const Value& object, const Value* start, const Value* stop, const Value* step);

// The items a for loop or a filter iterates: list/tuple items, dict keys, string code points; Undefined is
// empty; anything else is "TypeError: 'int' object is not iterable".
std::vector<Value> iterate(const Value& iterable);
// len(): strings in code points; Undefined 0; others a TypeError.
int64_t length_of(const Value& value);

// A Python int from a Value that must be one (bool counts), for indexes and counts.
int64_t require_int(const Value& value, const char* what);

}  // namespace mi::chat
