// Binding call arguments (positional and keyword) to the named parameters of a builtin filter, test, method
// or global function, with Python's TypeError wording for too many / unknown / missing arguments.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "chat/template_error.h"
#include "chat/template_value.h"

namespace mi::chat {

class BoundArgs {
 public:
  // params: parameter names in positional order.
  BoundArgs(const std::string& function, const CallArgs& args, std::vector<std::string> names)
      : function_(function), values_(names.size(), nullptr) {
    if (args.positional.size() > names.size()) {
      value_fail("TypeError: ", function, "() takes at most ", std::to_string(names.size()), " argument(s) (",
                 std::to_string(args.positional.size()), " given)");
    }
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = &args.positional[i];
    for (const auto& [name, value] : args.keyword) {
      size_t index = names.size();
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) index = i;
      }
      if (index == names.size()) {
        value_fail("TypeError: ", function, "() got an unexpected keyword argument '", name, "'");
      }
      if (values_[index]) value_fail("TypeError: ", function, "() got multiple values for argument '", name, "'");
      values_[index] = &value;
    }
    names_ = std::move(names);
  }

  // The argument for parameter i, or nullptr when not given.
  const Value* get(size_t i) const { return values_[i]; }
  bool has(size_t i) const { return values_[i] != nullptr; }

  const Value& required(size_t i) const {
    if (!values_[i]) value_fail("TypeError: ", function_, "() missing required argument '", names_[i], "'");
    return *values_[i];
  }

  // A string argument; absent or None -> nullopt.
  std::optional<std::string> optional_string(size_t i) const {
    if (!values_[i] || values_[i]->is_none()) return std::nullopt;
    return string_at(i);
  }

  std::string string_at(size_t i) const {
    const Value& v = required(i);
    v.require_defined();
    if (!v.is_string()) {
      value_fail("TypeError: ", function_, "() argument '", names_[i], "' must be str, not ", v.type_name());
    }
    return v.as_string();
  }

  int64_t int_or(size_t i, int64_t fallback) const {
    if (!values_[i]) return fallback;
    const Value& v = *values_[i];
    v.require_defined();
    if (!v.is_int() && !v.is_bool()) {
      value_fail("TypeError: ", function_, "() argument '", names_[i], "' must be int, not ", v.type_name());
    }
    return v.as_int();
  }

  bool bool_or(size_t i, bool fallback) const { return values_[i] ? values_[i]->truthy() : fallback; }

 private:
  std::string function_;
  std::vector<std::string> names_;
  std::vector<const Value*> values_;
};

}  // namespace mi::chat
