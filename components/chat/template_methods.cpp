#include "chat/template_methods.h"

#include <utf8proc.h>

#include "chat/python_text.h"
#include "chat/template_args.h"
#include "chat/template_error.h"
#include "chat/template_operators.h"

namespace mi::chat {
namespace {

// A bound method: `self` captured, arguments bound to `params` by name.
Value method(const Value& self, const std::string& type, const std::string& name,
             std::function<Value(const Value&, const BoundArgs&)> body, std::vector<std::string> params) {
  std::string qualified = type + "." + name;
  return Value::callable(qualified, [self, qualified, params = std::move(params), body](const CallArgs& args) {
    return body(self, BoundArgs(qualified, args, params));
  });
}

Value string_list(const std::vector<std::string>& parts) {
  check_list_size(parts.size());
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& part : parts) items.push_back(Value::string(part));
  return Value::list(std::move(items));
}

// startswith/endswith: the argument is a str or a tuple of str.
bool affix_matches(const std::string& text, const Value& affix, bool prefix, const std::string& fn) {
  auto one = [&](const Value& v) {
    v.require_defined();
    if (!v.is_string()) {
      value_fail("TypeError: ", fn, " first arg must be str or a tuple of str, not ", v.type_name());
    }
    const std::string& a = v.as_string();
    if (a.size() > text.size()) return false;
    return prefix ? text.compare(0, a.size(), a) == 0 : text.compare(text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const Value& v : affix.as_list()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

bool is_cased(char32_t c) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL || category == UTF8PROC_CATEGORY_LT;
}

bool all_code_points(const std::string& text, bool (*predicate)(char32_t)) {
  const std::u32string cps = py::decode_utf8(text);
  if (cps.empty()) return false;
  for (char32_t c : cps) {
    if (!predicate(c)) return false;
  }
  return true;
}

bool is_alpha(char32_t c) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
}
bool is_digit(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND; }
bool is_alnum(char32_t c) { return is_alpha(c) || is_digit(c); }

// Python's str.title(): a cased character after an uncased one starts a word.
std::string python_title(const std::string& text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : py::decode_utf8(text)) {
    const auto mapped = previous_cased ? utf8proc_tolower(c) : utf8proc_toupper(c);
    py::append_utf8(out, static_cast<char32_t>(mapped));
    previous_cased = is_cased(c);
  }
  return out;
}

// str.format: {} {0} {name} with .attr / [key] lookups and !r / !s conversions; format specs other than
// empty are not supported (an error, not a silently different prompt).
Value python_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      value_fail("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) value_fail("ValueError: Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 != field.size()) value_fail("ValueError: format specs are not supported in str.format");
      field.resize(colon);
    }
    const size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's')) {
        value_fail("ValueError: unsupported conversion in str.format field '", field, "'");
      }
      conversion = field[bang + 1];
      field.resize(bang);
    }
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '.' && field[name_end] != '[') ++name_end;
    const std::string name = field.substr(0, name_end);
    Value value;
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
      size_t index = auto_index++;
      if (!name.empty()) {
        index = 0;
        for (char d : name) {
          if (d < '0' || d > '9' || index > 1000000) value_fail("ValueError: bad field name '", name, "'");
          index = index * 10 + static_cast<size_t>(d - '0');
        }
      }
      if (index >= args.positional.size()) {
        value_fail("IndexError: Replacement index ", std::to_string(index), " out of range for positional args tuple");
      }
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.keyword) {
        if (k == name) {
          value = v;
          found = true;
        }
      }
      if (!found) value_fail("KeyError: '", name, "'");
    }
    size_t pos = name_end;
    while (pos < field.size()) {
      if (field[pos] == '.') {
        size_t end = pos + 1;
        while (end < field.size() && field[end] != '.' && field[end] != '[') ++end;
        value = get_attribute(value, field.substr(pos + 1, end - pos - 1));
        value.require_defined();
        pos = end;
      } else {
        const size_t end = field.find(']', pos);
        if (end == std::string::npos) value_fail("ValueError: Missing ']' in format string");
        const std::string key = field.substr(pos + 1, end - pos - 1);
        bool numeric = !key.empty() && key.size() < 18;
        for (char d : key) numeric = numeric && d >= '0' && d <= '9';
        value = get_item(value, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
        value.require_defined();
        pos = end + 1;
      }
    }
    out += conversion == 'r' ? value.repr() : value.to_output();
    check_string_size(out.size());
  }
  return Value::string(std::move(out));
}

std::optional<Value> string_method(const Value& self, const std::string& name) {
  using A = const BoundArgs&;
  const char* T = "str";
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method(self, T, name, [prefix, name](const Value& s, A a) {
      if (a.has(1) || a.has(2)) value_fail("TypeError: str.", name, " with start/end is not supported");
      return Value::boolean(affix_matches(s.as_string(), a.required(0), prefix, name));
    }, {"prefix", "start", "end"});
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return method(self, T, name, [right](const Value& s, A a) {
      const auto sep = a.optional_string(0);
      const int64_t maxsplit = a.int_or(1, -1);
      return string_list(right ? py::rsplit(s.as_string(), sep, maxsplit) : py::split(s.as_string(), sep, maxsplit));
    }, {"sep", "maxsplit"});
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return method(self, T, name, [left, right](const Value& s, A a) {
      return Value::string(py::strip(s.as_string(), a.optional_string(0), left, right));
    }, {"chars"});
  }
  if (name == "upper") return method(self, T, name, [](const Value& s, A) { return Value::string(py::to_upper(s.as_string())); }, {});
  if (name == "lower") return method(self, T, name, [](const Value& s, A) { return Value::string(py::to_lower(s.as_string())); }, {});
  if (name == "capitalize") return method(self, T, name, [](const Value& s, A) { return Value::string(py::capitalize(s.as_string())); }, {});
  if (name == "title") return method(self, T, name, [](const Value& s, A) { return Value::string(python_title(s.as_string())); }, {});
  if (name == "replace") {
    return method(self, T, name, [](const Value& s, A a) {
      const std::string old_text = a.string_at(0);
      const std::string new_text = a.string_at(1);
      const int64_t count = a.int_or(2, -1);
      // Bound the result before building it: every replacement adds at most new_text.size() bytes.
      const size_t occurrences = old_text.empty() ? py::code_point_count(s.as_string()) + 1 : s.as_string().size() / old_text.size();
      check_string_size(s.as_string().size() + (new_text.size() > old_text.size() ? occurrences * (new_text.size() - old_text.size()) : 0));
      return Value::string(py::replace(s.as_string(), old_text, new_text, count));
    }, {"old", "new", "count"});
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return method(self, T, name, [name](const Value& s, A a) {
      const std::string sub = a.string_at(0);
      if (a.has(1) || a.has(2)) value_fail("TypeError: str.", name, " with start/end is not supported");
      const std::string& text = s.as_string();
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(py::code_point_count(text)) + 1);
        int64_t n = 0;
        for (size_t at = text.find(sub); at != std::string::npos; at = text.find(sub, at + sub.size())) ++n;
        return Value::integer(n);
      }
      const bool from_right = name == "rfind" || name == "rindex";
      const size_t at = from_right ? text.rfind(sub) : text.find(sub);
      if (at == std::string::npos) {
        if (name == "index" || name == "rindex") value_fail("ValueError: substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(py::code_point_count(std::string_view(text).substr(0, at))));
    }, {"sub", "start", "end"});
  }
  if (name == "join") {
    return method(self, T, name, [](const Value& s, A a) {
      std::string out;
      size_t index = 0;
      for (const Value& item : iterate(a.required(0))) {
        if (!item.is_string()) {
          value_fail("TypeError: sequence item ", std::to_string(index), ": expected str instance, ", item.type_name(), " found");
        }
        if (index++ > 0) out += s.as_string();
        out += item.as_string();
        check_string_size(out.size());
      }
      return Value::string(std::move(out));
    }, {"iterable"});
  }
  if (name == "format") {
    return Value::callable("str.format", [self](const CallArgs& args) { return python_format(self.as_string(), args); });
  }
  if (name == "splitlines") {
    return method(self, T, name, [](const Value& s, A a) {
      if (a.bool_or(0, false)) value_fail("TypeError: str.splitlines(keepends=True) is not supported");
      std::vector<std::string> lines;
      std::string line;
      const std::string& text = s.as_string();
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n' || text[i] == '\r') {
          if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
          lines.push_back(std::move(line));
          line.clear();
        } else {
          line.push_back(text[i]);
        }
      }
      if (!line.empty()) lines.push_back(std::move(line));
      return string_list(lines);
    }, {"keepends"});
  }
  using Predicate = bool (*)(char32_t);
  static const std::pair<const char*, Predicate> kPredicates[] = {
      {"isdigit", is_digit}, {"isalpha", is_alpha}, {"isalnum", is_alnum}, {"isspace", py::is_space}};
  for (const auto& [predicate_name, predicate] : kPredicates) {
    if (name == predicate_name) {
      Predicate p = predicate;
      return method(self, T, name, [p](const Value& s, A) { return Value::boolean(all_code_points(s.as_string(), p)); }, {});
    }
  }
  if (name == "islower" || name == "isupper") {
    const bool lower = name == "islower";
    return method(self, T, name, [lower](const Value& s, A) {
      bool any_cased = false;
      for (char32_t c : py::decode_utf8(s.as_string())) {
        if (!is_cased(c)) continue;
        any_cased = true;
        const bool is_lower = utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LL;
        if (lower != is_lower) return Value::boolean(false);
      }
      return Value::boolean(any_cased);
    }, {});
  }
  return std::nullopt;
}

Value unsafe(const Value& self, const std::string& name) {
  return Value::undefined("SecurityError: access to attribute '" + name + "' of '" + self.type_name() +
                          "' object is unsafe.");
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  using A = const BoundArgs&;
  if (name == "items") {
    return method(self, "dict", name, [](const Value& d, A) {
      std::vector<Value> pairs;
      for (const auto& [k, v] : d.as_dict().entries) pairs.push_back(Value::list({Value::string(k), v}, true));
      return Value::list(std::move(pairs));
    }, {});
  }
  if (name == "keys") {
    return method(self, "dict", name, [](const Value& d, A) { return Value::list(iterate(d)); }, {});
  }
  if (name == "values") {
    return method(self, "dict", name, [](const Value& d, A) {
      std::vector<Value> values;
      for (const auto& entry : d.as_dict().entries) values.push_back(entry.second);
      return Value::list(std::move(values));
    }, {});
  }
  if (name == "get") {
    return method(self, "dict", name, [](const Value& d, A a) {
      const Value& key = a.required(0);
      const Value* found = key.is_string() ? d.as_dict().find(key.as_string()) : nullptr;
      if (found) return *found;
      return a.has(1) ? *a.get(1) : Value::none();
    }, {"key", "default"});
  }
  if (name == "copy") return method(self, "dict", name, [](const Value& d, A) { return d; }, {});
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "fromkeys") {
    return unsafe(self, name);
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  using A = const BoundArgs&;
  if (name == "index" || name == "count") {
    const bool count = name == "count";
    return method(self, self.type_name(), name, [count](const Value& l, A a) {
      const Value& needle = a.required(0);
      int64_t n = 0;
      const auto& items = l.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!values_equal(items[i], needle)) continue;
        if (!count) return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (!count) value_fail("ValueError: ", needle.repr(), " is not in list");
      return Value::integer(n);
    }, {"value"});
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort" || name == "clear") {
    return unsafe(self, name);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> get_method(const Value& self, const std::string& name) {
  switch (self.kind()) {
    case Value::Kind::kString: return string_method(self, name);
    case Value::Kind::kDict: return dict_method(self, name);
    case Value::Kind::kList: return list_method(self, name);
    default: return std::nullopt;
  }
}

}  // namespace mi::chat
