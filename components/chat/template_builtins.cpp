#include "chat/template_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>

#include <utf8proc.h>

#include "chat/python_text.h"
#include "chat/template_args.h"
#include "chat/template_error.h"
#include "chat/template_operators.h"

namespace mi::chat {
namespace {

using A = const BoundArgs&;

// ---- helpers ----------------------------------------------------------------------------------------------

// Jinja2's make_attrgetter: "a.b.0" looks up each dotted part with getitem (integers as indexes).
Value lookup_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && part.size() < 18;
    for (char c : part) numeric = numeric && c >= '0' && c <= '9';
    current = get_item(current, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value lower_if_string(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py::to_lower(v.as_string()));
  return v;
}

// Stable sort by a key function, Python's sorted() (comparison errors propagate as TypeError).
std::vector<Value> sorted_by(std::vector<Value> items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) {
    Value k = key(item);
    keyed.emplace_back(std::move(k), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? value_less(y.first, x.first, "<") : value_less(x.first, y.first, "<");
  });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& entry : keyed) out.push_back(std::move(entry.second));
  return out;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Python's float() syntax (decimal digits, sign, point, exponent, inf/nan), unlike strtod no hex floats.
bool python_float_syntax(const std::string& text) {
  std::string lower = py::to_lower(text);
  if (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) lower.erase(0, 1);
  if (lower == "inf" || lower == "infinity" || lower == "nan") return true;
  if (lower.empty()) return false;
  for (char c : lower) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '+' || c == '-')) return false;
  }
  return true;
}

// int() of a string the way Jinja2's int filter tries it: int(s), then int(float(s)); nullopt if neither.
std::optional<int64_t> parse_int(const std::string& raw) {
  const std::string text = py::strip(raw, std::nullopt, true, true);
  if (text.empty()) return std::nullopt;
  std::string digits;
  for (char c : text) {
    if (c != '_') digits.push_back(c);
  }
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (end == digits.c_str() + digits.size() && errno == 0) return v;
  if (!python_float_syntax(text)) return std::nullopt;
  errno = 0;
  const double d = std::strtod(text.c_str(), &end);
  if (end == text.c_str() + text.size() && errno == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  return std::nullopt;
}

std::optional<double> parse_float(const std::string& raw) {
  const std::string text = py::strip(raw, std::nullopt, true, true);
  if (text.empty() || !python_float_syntax(text)) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end == text.c_str() + text.size()) return d;
  return std::nullopt;
}

// Arguments after the first `skip` positional ones, for select('test', args...) / map('filter', args...).
CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs rest;
  if (args.positional.size() > skip) rest.positional.assign(args.positional.begin() + static_cast<long>(skip), args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

std::vector<Value> select_items(const Value& input, const CallArgs& args, bool keep_matches, bool by_attribute,
                                const char* filter_name) {
  std::string attribute;
  size_t test_index = 0;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      value_fail("TypeError: ", filter_name, "() needs an attribute name");
    }
    attribute = args.positional[0].as_string();
    test_index = 1;
  }
  std::optional<std::string> test;
  if (args.positional.size() > test_index) {
    const Value& t = args.positional[test_index];
    if (!t.is_string()) value_fail("TypeError: ", filter_name, "() test name must be a string");
    test = t.as_string();
    if (!has_test(*test)) value_fail("TemplateRuntimeError: No test named '", *test, "'");
  }
  const CallArgs test_args = rest_args(args, test_index + 1);
  std::vector<Value> out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? lookup_path(item, attribute) : item;
    const bool matches = test ? apply_test(*test, subject, test_args) : subject.truthy();
    if (matches == keep_matches) out.push_back(item);
  }
  return out;
}

JsonDumpOptions json_options(A a) {
  JsonDumpOptions options;
  options.ensure_ascii = a.bool_or(0, false);
  if (const Value* indent = a.get(1); indent && !indent->is_none()) {
    if (indent->is_string()) {
      options.indent = indent->as_string();
    } else if (indent->is_int() || indent->is_bool()) {
      options.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    } else {
      value_fail("TypeError: tojson() indent must be an int or a str, not ", indent->type_name());
    }
  }
  if (const Value* separators = a.get(2); separators && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2 || !separators->as_list()[0].is_string() ||
        !separators->as_list()[1].is_string()) {
      value_fail("TypeError: tojson() separators must be a pair of strings");
    }
    options.separators = std::make_pair(separators->as_list()[0].as_string(), separators->as_list()[1].as_string());
  }
  options.sort_keys = a.bool_or(3, false);
  return options;
}

Value indent_text(const std::string& text, const std::string& indention, bool first, bool blank) {
  // Lines of text + "\n" (Jinja2's indent filter appends a newline before splitting).
  std::vector<std::string> lines = py::split(text + "\n", std::string("\n"), -1);
  lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    check_string_size(out.size());
  }
  if (first) out = indention + out;
  return Value::string(std::move(out));
}

double round_half_even(double x) { return std::nearbyint(x); }  // default FE_TONEAREST = Python's round()

// ---- the filter table -------------------------------------------------------------------------------------

using FilterFn = std::function<Value(const Value&, const CallArgs&)>;

// Wraps a filter body with named parameters (after the input).
FilterFn with_params(const char* name, std::vector<std::string> params, std::function<Value(const Value&, A)> body) {
  return [name, params = std::move(params), body = std::move(body)](const Value& input, const CallArgs& args) {
    return body(input, BoundArgs(name, args, params));
  };
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = [] {
    std::map<std::string, FilterFn, std::less<>> t;
    t["abs"] = with_params("abs", {}, [](const Value& v, A) {
      v.require_defined();
      if (v.is_float()) return Value::number(std::fabs(v.as_double()));
      if (v.is_int() || v.is_bool()) {
        if (v.as_int() < 0) return negate(v);
        return Value::integer(v.as_int());
      }
      value_fail("TypeError: bad operand type for abs(): '", v.type_name(), "'");
    });
    t["attr"] = with_params("attr", {"name"}, [](const Value& v, A a) {
      const std::string name = a.string_at(0);
      v.require_defined();
      if (v.is_namespace()) return get_attribute(v, name);
      if (auto m = get_attribute(v, name); !m.is_undefined() && (m.is_callable() || !v.is_dict())) return m;
      return Value::undefined("UndefinedError: " + py::repr_string(v.object_description()) + " has no attribute " + py::repr_string(name));
    });
    t["capitalize"] = with_params("capitalize", {}, [](const Value& v, A) { return Value::string(py::capitalize(v.to_output())); });
    t["default"] = with_params("default", {"default_value", "boolean"}, [](const Value& v, A a) {
      const bool boolean = a.bool_or(1, false);
      if (v.is_undefined() || (boolean && !v.truthy())) return a.has(0) ? *a.get(0) : Value::string("");
      return v;
    });
    t["d"] = t["default"];
    t["dictsort"] = with_params("dictsort", {"case_sensitive", "by", "reverse"}, [](const Value& v, A a) {
      v.require_defined();
      if (!v.is_dict()) value_fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
      const bool case_sensitive = a.bool_or(0, false);
      const std::string by = a.has(1) ? a.string_at(1) : "key";
      if (by != "key" && by != "value") value_fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
      std::vector<Value> pairs;
      for (const auto& [k, item] : v.as_dict().entries) pairs.push_back(Value::list({Value::string(k), item}, true));
      const size_t position = by == "key" ? 0 : 1;
      return Value::list(sorted_by(std::move(pairs), [&](const Value& p) {
        return lower_if_string(p.as_list()[position], case_sensitive);
      }, a.bool_or(2, false)));
    });
    t["escape"] = with_params("escape", {}, [](const Value& v, A) { return Value::string(html_escape(v.to_output())); });
    t["e"] = t["escape"];
    t["first"] = with_params("first", {}, [](const Value& v, A) {
      if (v.is_list()) return v.as_list().empty() ? Value::undefined("UndefinedError: No first item, sequence was empty.") : v.as_list().front();
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("UndefinedError: No first item, sequence was empty.") : items.front();
    });
    t["last"] = with_params("last", {}, [](const Value& v, A) {
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("UndefinedError: No last item, sequence was empty.") : items.back();
    });
    t["float"] = with_params("float", {"default"}, [](const Value& v, A a) {
      const Value fallback = a.has(0) ? *a.get(0) : Value::number(0.0);
      v.require_defined();  // float(Undefined) raises in Jinja2
      if (v.is_number()) return Value::number(v.as_double());
      if (v.is_string()) {
        if (auto d = parse_float(v.as_string())) return Value::number(*d);
      }
      return fallback;
    });
    t["int"] = with_params("int", {"default", "base"}, [](const Value& v, A a) {
      const Value fallback = a.has(0) ? *a.get(0) : Value::integer(0);
      if (a.int_or(1, 10) != 10) value_fail("FilterArgumentError: int filter with a base other than 10 is not supported");
      v.require_defined();  // int(Undefined) raises in Jinja2
      if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
      if (v.is_float()) {
        const double d = v.as_double();
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
        return Value::integer(static_cast<int64_t>(d));
      }
      if (v.is_string()) {
        if (auto i = parse_int(v.as_string())) return Value::integer(*i);
      }
      return fallback;
    });
    t["join"] = with_params("join", {"d", "attribute"}, [](const Value& v, A a) {
      const std::string separator = a.has(0) ? a.get(0)->to_output() : "";
      const std::optional<std::string> attribute = a.optional_string(1);
      std::string out;
      bool first = true;
      for (const Value& item : iterate(v)) {
        if (!first) out += separator;
        first = false;
        out += (attribute ? lookup_path(item, *attribute) : item).to_output();
        check_string_size(out.size());
      }
      return Value::string(std::move(out));
    });
    t["length"] = with_params("length", {}, [](const Value& v, A) { return Value::integer(length_of(v)); });
    t["count"] = t["length"];
    t["list"] = with_params("list", {}, [](const Value& v, A) { return Value::list(iterate(v)); });
    t["lower"] = with_params("lower", {}, [](const Value& v, A) { return Value::string(py::to_lower(v.to_output())); });
    t["upper"] = with_params("upper", {}, [](const Value& v, A) { return Value::string(py::to_upper(v.to_output())); });
    t["title"] = with_params("title", {}, [](const Value& v, A) { return Value::string(py::title(v.to_output())); });
    t["trim"] = with_params("trim", {"chars"}, [](const Value& v, A a) {
      return Value::string(py::strip(v.to_output(), a.optional_string(0), true, true));
    });
    t["string"] = with_params("string", {}, [](const Value& v, A) { return Value::string(v.to_output()); });
    t["safe"] = with_params("safe", {}, [](const Value& v, A) { return v; });
    t["replace"] = with_params("replace", {"old", "new", "count"}, [](const Value& v, A a) {
      const std::string text = v.to_output();
      const std::string old_text = a.required(0).to_output();
      const std::string new_text = a.required(1).to_output();
      const int64_t count = a.has(2) && !a.get(2)->is_none() ? a.int_or(2, -1) : -1;
      const size_t occurrences = old_text.empty() ? py::code_point_count(text) + 1 : text.size() / old_text.size();
      check_string_size(text.size() + (new_text.size() > old_text.size() ? occurrences * (new_text.size() - old_text.size()) : 0));
      return Value::string(py::replace(text, old_text, new_text, count));
    });
    t["items"] = with_params("items", {}, [](const Value& v, A) {
      if (v.is_undefined()) return Value::list({});
      if (!v.is_dict()) value_fail("TypeError: Can only get item pairs from a mapping.");
      std::vector<Value> pairs;
      for (const auto& [k, item] : v.as_dict().entries) pairs.push_back(Value::list({Value::string(k), item}, true));
      return Value::list(std::move(pairs));
    });
    t["map"] = [](const Value& v, const CallArgs& args) {
      std::vector<Value> out;
      const Value* attribute = nullptr;
      const Value* fallback = nullptr;
      for (const auto& [k, kv] : args.keyword) {
        if (k == "attribute") attribute = &kv;
        else if (k == "default") fallback = &kv;
      }
      if (attribute) {
        if (!attribute->is_string()) value_fail("TypeError: map() attribute must be a string");
        for (const Value& item : iterate(v)) {
          Value mapped = lookup_path(item, attribute->as_string());
          if (mapped.is_undefined() && fallback) mapped = *fallback;
          out.push_back(std::move(mapped));
        }
        return Value::list(std::move(out));
      }
      const std::vector<Value> items = iterate(v);
      if (items.empty()) return Value::list({});  // Jinja2's map is lazy: nothing to map, nothing checked
      if (args.positional.empty() || !args.positional[0].is_string()) {
        value_fail("FilterArgumentError: map requires a filter argument");
      }
      const std::string name = args.positional[0].as_string();
      if (!has_filter(name)) value_fail("TemplateRuntimeError: No filter named '", name, "'");
      const CallArgs filter_args = rest_args(args, 1);
      for (const Value& item : items) out.push_back(apply_filter(name, item, filter_args));
      return Value::list(std::move(out));
    };
    t["select"] = [](const Value& v, const CallArgs& args) { return Value::list(select_items(v, args, true, false, "select")); };
    t["reject"] = [](const Value& v, const CallArgs& args) { return Value::list(select_items(v, args, false, false, "reject")); };
    t["selectattr"] = [](const Value& v, const CallArgs& args) { return Value::list(select_items(v, args, true, true, "selectattr")); };
    t["rejectattr"] = [](const Value& v, const CallArgs& args) { return Value::list(select_items(v, args, false, true, "rejectattr")); };
    t["sort"] = with_params("sort", {"reverse", "case_sensitive", "attribute"}, [](const Value& v, A a) {
      const bool case_sensitive = a.bool_or(1, false);
      const std::optional<std::string> attribute = a.optional_string(2);
      return Value::list(sorted_by(iterate(v), [&](const Value& item) {
        return lower_if_string(attribute ? lookup_path(item, *attribute) : item, case_sensitive);
      }, a.bool_or(0, false)));
    });
    t["unique"] = with_params("unique", {"case_sensitive", "attribute"}, [](const Value& v, A a) {
      const bool case_sensitive = a.bool_or(0, false);
      const std::optional<std::string> attribute = a.optional_string(1);
      std::vector<Value> seen;
      std::vector<Value> out;
      for (const Value& item : iterate(v)) {
        Value key = lower_if_string(attribute ? lookup_path(item, *attribute) : item, case_sensitive);
        bool duplicate = false;
        for (const Value& s : seen) duplicate = duplicate || values_equal(s, key);
        if (!duplicate) {
          seen.push_back(std::move(key));
          out.push_back(item);
        }
      }
      return Value::list(std::move(out));
    });
    for (const char* extreme : {"min", "max"}) {
      const bool want_max = std::string(extreme) == "max";
      t[extreme] = with_params(extreme, {"case_sensitive", "attribute"}, [want_max](const Value& v, A a) {
        const bool case_sensitive = a.bool_or(0, false);
        const std::optional<std::string> attribute = a.optional_string(1);
        std::optional<Value> best;
        Value best_key;
        for (const Value& item : iterate(v)) {
          Value key = lower_if_string(attribute ? lookup_path(item, *attribute) : item, case_sensitive);
          if (!best || (want_max ? value_less(best_key, key, "<") : value_less(key, best_key, "<"))) {
            best = item;
            best_key = std::move(key);
          }
        }
        if (!best) return Value::undefined(std::string("UndefinedError: No aggregated item, sequence was empty."));
        return *best;
      });
    }
    t["reverse"] = with_params("reverse", {}, [](const Value& v, A) {
      if (v.is_string()) {
        std::u32string cps = py::decode_utf8(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value::string(py::encode_utf8(cps));
      }
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    });
    t["round"] = with_params("round", {"precision", "method"}, [](const Value& v, A a) {
      v.require_defined();
      if (!v.is_number()) value_fail("TypeError: round() needs a number, not ", v.type_name());
      const int64_t precision = a.int_or(0, 0);
      const std::string method = a.has(1) ? a.string_at(1) : "common";
      if (method != "common" && method != "ceil" && method != "floor") {
        value_fail("FilterArgumentError: method must be common, ceil or floor");
      }
      if (method == "common" && !v.is_float() && precision >= 0) return Value::integer(v.as_int());
      const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
      const double x = v.as_double() * scale;
      const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : round_half_even(x);
      return Value::number(r / scale);
    });
    t["sum"] = with_params("sum", {"attribute", "start"}, [](const Value& v, A a) {
      const std::optional<std::string> attribute = a.optional_string(0);
      Value total = a.has(1) ? *a.get(1) : Value::integer(0);
      for (const Value& item : iterate(v)) total = binary_operation("+", total, attribute ? lookup_path(item, *attribute) : item);
      return total;
    });
    t["tojson"] = with_params("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, [](const Value& v, A a) {
      std::string json = dump_json(v, json_options(a));
      check_string_size(json.size());
      return Value::string(std::move(json));
    });
    t["indent"] = with_params("indent", {"width", "first", "blank"}, [](const Value& v, A a) {
      std::string indention = "    ";
      if (const Value* width = a.get(0)) {
        if (width->is_string()) indention = width->as_string();
        else indention = std::string(static_cast<size_t>(std::clamp<int64_t>(a.int_or(0, 4), 0, 256)), ' ');
      }
      return indent_text(v.to_output(), indention, a.bool_or(1, false), a.bool_or(2, false));
    });
    t["format"] = [](const Value& v, const CallArgs& args) {
      if (!args.keyword.empty()) value_fail("FilterArgumentError: format filter with keyword arguments is not supported");
      return binary_operation("%", Value::string(v.to_output()), Value::list(args.positional, true));
    };
    t["center"] = with_params("center", {"width"}, [](const Value& v, A a) {
      const std::string text = v.to_output();
      const int64_t width = std::min<int64_t>(a.int_or(0, 80), 1 << 20);
      const int64_t length = static_cast<int64_t>(py::code_point_count(text));
      if (width <= length) return Value::string(text);
      const int64_t pad = width - length;
      const int64_t left = pad / 2 + (pad & width & 1);  // CPython's str.center split
      return Value::string(std::string(static_cast<size_t>(left), ' ') + text + std::string(static_cast<size_t>(pad - left), ' '));
    });
    t["wordcount"] = with_params("wordcount", {}, [](const Value& v, A) {
      // Jinja2 counts matches of the regex \w+ (Unicode letters, digits and underscore).
      int64_t words = 0;
      bool in_word = false;
      for (char32_t c : py::decode_utf8(v.to_output())) {
        const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        const bool word_char = c == U'_' || (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) ||
                               (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO);
        if (word_char && !in_word) ++words;
        in_word = word_char;
      }
      return Value::integer(words);
    });
    return t;
  }();
  return table;
}

// ---- the test table ---------------------------------------------------------------------------------------

using TestFn = std::function<bool(const Value&, const CallArgs&)>;

TestFn test_with_params(const char* name, std::vector<std::string> params, std::function<bool(const Value&, A)> body) {
  return [name, params = std::move(params), body = std::move(body)](const Value& input, const CallArgs& args) {
    return body(input, BoundArgs(name, args, params));
  };
}

TestFn plain_test(const char* name, bool (*predicate)(const Value&)) {
  return test_with_params(name, {}, [predicate](const Value& v, A) { return predicate(v); });
}

TestFn comparison_test(const char* name, const char* op) {
  const std::string operation = op;
  return test_with_params(name, {"other"}, [operation](const Value& v, A a) { return compare(operation, v, a.required(0)); });
}

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone: case Value::Kind::kUndefined: return true;
    case Value::Kind::kBool: return a.as_bool() == b.as_bool();
    case Value::Kind::kInt: return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;  // CPython's cached ints
    case Value::Kind::kList: return &a.as_list() == &b.as_list();
    case Value::Kind::kDict: return &a.as_dict() == &b.as_dict();
    case Value::Kind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;  // distinct str/float objects
  }
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = [] {
    std::map<std::string, TestFn, std::less<>> t;
    t["defined"] = plain_test("defined", [](const Value& v) { return !v.is_undefined(); });
    t["undefined"] = plain_test("undefined", [](const Value& v) { return v.is_undefined(); });
    t["none"] = plain_test("none", [](const Value& v) { return v.is_none(); });
    t["boolean"] = plain_test("boolean", [](const Value& v) { return v.is_bool(); });
    t["true"] = plain_test("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
    t["false"] = plain_test("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
    t["integer"] = plain_test("integer", [](const Value& v) { return v.is_int(); });
    t["float"] = plain_test("float", [](const Value& v) { return v.is_float(); });
    t["number"] = plain_test("number", [](const Value& v) { return v.is_number(); });
    t["string"] = plain_test("string", [](const Value& v) { return v.is_string(); });
    t["mapping"] = plain_test("mapping", [](const Value& v) { return v.is_dict(); });
    t["iterable"] = plain_test("iterable", [](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    });
    t["sequence"] = plain_test("sequence", [](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    });
    // Jinja2's Undefined defines __call__ (to raise), so Python's callable() is true for it.
    t["callable"] = plain_test("callable", [](const Value& v) { return v.is_callable() || v.is_undefined(); });
    t["escaped"] = plain_test("escaped", [](const Value&) { return false; });
    t["odd"] = test_with_params("odd", {}, [](const Value& v, A) { return (require_int(v, "odd test value") & 1) != 0; });
    t["even"] = test_with_params("even", {}, [](const Value& v, A) { return (require_int(v, "even test value") & 1) == 0; });
    t["divisibleby"] = test_with_params("divisibleby", {"num"}, [](const Value& v, A a) {
      const int64_t divisor = require_int(a.required(0), "divisibleby argument");
      const int64_t value = require_int(v, "divisibleby value");
      if (divisor == 0) value_fail("ZeroDivisionError: integer division or modulo by zero");
      if (divisor == -1) return true;
      return value % divisor == 0;
    });
    t["lower"] = test_with_params("lower", {}, [](const Value& v, A) {
      const std::string s = v.to_output();
      return py::to_lower(s) == s && py::to_upper(s) != s;
    });
    t["upper"] = test_with_params("upper", {}, [](const Value& v, A) {
      const std::string s = v.to_output();
      return py::to_upper(s) == s && py::to_lower(s) != s;
    });
    t["sameas"] = test_with_params("sameas", {"other"}, [](const Value& v, A a) { return same_as(v, a.required(0)); });
    t["eq"] = comparison_test("eq", "==");
    t["equalto"] = t["eq"];
    t["=="] = t["eq"];
    t["ne"] = comparison_test("ne", "!=");
    t["!="] = t["ne"];
    t["lt"] = comparison_test("lt", "<");
    t["lessthan"] = t["lt"];
    t["<"] = t["lt"];
    t["le"] = comparison_test("le", "<=");
    t["<="] = t["le"];
    t["gt"] = comparison_test("gt", ">");
    t["greaterthan"] = t["gt"];
    t[">"] = t["gt"];
    t["ge"] = comparison_test("ge", ">=");
    t[">="] = t["ge"];
    t["in"] = test_with_params("in", {"seq"}, [](const Value& v, A a) { return contains(a.required(0), v); });
    t["filter"] = test_with_params("filter", {}, [](const Value& v, A) { return v.is_string() && has_filter(v.as_string()); });
    t["test"] = test_with_params("test", {}, [](const Value& v, A) { return v.is_string() && has_test(v.as_string()); });
    return t;
  }();
  return table;
}

// ---- globals ----------------------------------------------------------------------------------------------

Value range_function(const CallArgs& args) {
  if (!args.keyword.empty()) value_fail("TypeError: range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    value_fail("TypeError: range expected 1 to 3 arguments, got ", std::to_string(args.positional.size()));
  }
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (args.positional.size() == 1) {
    stop = require_int(args.positional[0], "range() argument");
  } else {
    start = require_int(args.positional[0], "range() argument");
    stop = require_int(args.positional[1], "range() argument");
    if (args.positional.size() == 3) step = require_int(args.positional[2], "range() argument");
  }
  if (step == 0) value_fail("ValueError: range() arg 3 must not be zero");
  // Count first (in wide arithmetic) so a huge range fails before allocating.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  // Jinja2's sandbox refuses ranges longer than its MAX_RANGE.
  if (count > 100000) value_fail("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  if (count > static_cast<__int128>(value_limits().max_list_items)) check_list_size(value_limits().max_list_items + 1);
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i) items.push_back(Value::integer(static_cast<int64_t>(start + i * step)));
  return Value::list(std::move(items));
}

Dict keyword_dict(const CallArgs& args, const char* function) {
  Dict dict;
  if (args.positional.size() > 1) value_fail("TypeError: ", function, "() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    source.require_defined();
    if (!source.is_dict()) value_fail("TypeError: ", function, "() positional argument must be a mapping");
    for (const auto& [k, v] : source.as_dict().entries) dict.set(k, v);
  }
  for (const auto& [k, v] : args.keyword) dict.set(k, v);
  return dict;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().find(name) != filters().end(); }
bool has_test(std::string_view name) { return tests().find(name) != tests().end(); }

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) value_fail("TemplateAssertionError: No filter named '", name, "'.");
  return it->second(input, args);
}

bool apply_test(const std::string& name, const Value& input, const CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) value_fail("TemplateAssertionError: No test named '", name, "'.");
  return it->second(input, args);
}

Dict builtin_globals() {
  Dict globals;
  globals.set("range", Value::callable("range", range_function));
  globals.set("namespace", Value::callable("namespace", [](const CallArgs& args) {
    return Value::new_namespace(keyword_dict(args, "namespace"));
  }));
  globals.set("dict", Value::callable("dict", [](const CallArgs& args) { return Value::dict(keyword_dict(args, "dict")); }));
  // Hugging Face's chat-template globals (transformers' apply_chat_template environment).
  globals.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& args) -> Value {
    BoundArgs a("raise_exception", args, {"message"});
    value_fail("TemplateError: ", a.required(0).to_output());
  }));
  globals.set("strftime_now", Value::callable("strftime_now", [](const CallArgs& args) {
    BoundArgs a("strftime_now", args, {"format"});
    const std::string format = a.string_at(0);
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[512];
    const size_t n = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
    if (n == 0 && !format.empty()) value_fail("ValueError: strftime_now() format too long or empty result");
    return Value::string(std::string(buffer, n));
  }));
  return globals;
}

}  // namespace mi::chat
