#include "chat/template_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "chat/python_text.h"
#include "chat/template_error.h"

namespace mi::chat {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  depth = std::max(depth, 1 + value.nesting_depth());
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto list = std::make_shared<List>();
  list->is_tuple = is_tuple;
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.nesting_depth());
  list->depth = deepest + 1;
  if (list->depth > kMaxValueNesting) {
    value_fail("ValueError: lists/dicts nested deeper than ", std::to_string(kMaxValueNesting), " levels");
  }
  list->items = std::move(items);
  return Value(Storage(std::shared_ptr<const List>(std::move(list))));
}

Value Value::dict(Dict dict) {
  int deepest = 0;
  for (const auto& entry : dict.entries) deepest = std::max(deepest, entry.second.nesting_depth());
  dict.depth = deepest + 1;
  if (dict.depth > kMaxValueNesting) {
    value_fail("ValueError: lists/dicts nested deeper than ", std::to_string(kMaxValueNesting), " levels");
  }
  return Value(Storage(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(dict)))));
}

Value Value::new_namespace(Dict attributes) {
  auto ns = std::make_shared<Namespace>();
  ns->attributes = std::move(attributes);
  return Value(Storage(std::move(ns)));
}

Value Value::callable(std::string name, std::function<Value(const CallArgs&)> call) {
  return Value(Storage(std::shared_ptr<const Callable>(
      std::make_shared<Callable>(Callable{std::move(name), std::move(call)}))));
}

namespace {

Value from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueNesting) {
    value_fail("ValueError: JSON input nested deeper than ", std::to_string(kMaxValueNesting), " levels");
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        value_fail("OverflowError: JSON integer ", std::to_string(u), " does not fit in 64 bits");
      }
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.set(key, from_json_at(item, depth + 1));
      return Value::dict(std::move(dict));
    }
    default:
      value_fail("TypeError: unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 1); }

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(storage_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(storage_);
  return static_cast<double>(as_int());
}

bool Value::is_tuple() const {
  return is_list() && std::get<std::shared_ptr<const List>>(storage_)->is_tuple;
}

int Value::nesting_depth() const {
  if (is_list()) return std::get<std::shared_ptr<const List>>(storage_)->depth;
  if (is_dict()) return as_dict().depth;
  return 0;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return is_tuple() ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::string Value::object_description() const {
  // jinja2.utils.object_type_repr: None is 'None', builtins are "<type> object".
  if (is_none()) return "None";
  if (is_namespace()) return "jinja2.utils.Namespace object";
  return type_name() + " object";
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_double() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !as_list().empty();
    case Kind::kDict: return !as_dict().entries.empty();
    case Kind::kNamespace: case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::to_output() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(as_int());
    case Kind::kFloat: return py::repr_float(as_double());
    case Kind::kString: return py::repr_string(as_string());
    case Kind::kList: {
      const bool tuple = is_tuple();
      std::string out = tuple ? "(" : "[";
      bool first = true;
      for (const Value& item : as_list()) {
        if (!first) out += ", ";
        first = false;
        out += item.repr();
      }
      if (tuple && as_list().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += py::repr_string(key) + ": " + item.repr();
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      return "<Namespace " + Value::dict(as_namespace().attributes).repr() + ">";
    }
    case Kind::kCallable: return "<function " + as_callable().name + ">";
  }
  return "";
}

const Value& Value::require_defined() const {
  if (is_undefined()) value_fail(undefined_hint());
  return *this;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined: case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.find(key);
        if (!other || !values_equal(item, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool value_less(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 bytes sort as code points
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return value_less(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  a.require_defined();
  b.require_defined();
  value_fail("TypeError: '", op, "' not supported between instances of '", a.type_name(), "' and '",
             b.type_name(), "'");
}

namespace {

// json.dumps string escaping (Lib/json/encoder.py): ensure_ascii=False escapes only " \ and control
// characters; ensure_ascii=True also escapes everything outside printable ASCII as \uXXXX (surrogate pairs).
void append_json_string(std::string& out, const std::string& text, bool ensure_ascii) {
  out.push_back('"');
  char buffer[16];
  auto escape_unit = [&](unsigned unit) {
    std::snprintf(buffer, sizeof buffer, "\\u%04x", unit);
    out += buffer;
  };
  for (char32_t c : py::decode_utf8(text)) {
    switch (c) {
      case U'"': out += "\\\""; continue;
      case U'\\': out += "\\\\"; continue;
      case U'\n': out += "\\n"; continue;
      case U'\r': out += "\\r"; continue;
      case U'\t': out += "\\t"; continue;
      case U'\b': out += "\\b"; continue;
      case U'\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c > 0xFFFF) {
        const unsigned v = static_cast<unsigned>(c) - 0x10000;
        escape_unit(0xD800 | (v >> 10));
        escape_unit(0xDC00 | (v & 0x3FF));
      } else {
        escape_unit(static_cast<unsigned>(c));
      }
    } else {
      py::append_utf8(out, c);
    }
  }
  out.push_back('"');
}

void append_json(std::string& out, const Value& value, const JsonDumpOptions& options,
                 const std::string& item_sep, const std::string& key_sep, int level) {
  auto newline_indent = [&](int depth) {
    out.push_back('\n');
    for (int i = 0; i < depth; ++i) out += *options.indent;
  };
  switch (value.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += value.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(value.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = value.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += py::repr_float(d);
      return;
    }
    case Value::Kind::kString: append_json_string(out, value.as_string(), options.ensure_ascii); return;
    case Value::Kind::kList: {
      const auto& items = value.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        if (options.indent) newline_indent(level + 1);
        append_json(out, items[i], options, item_sep, key_sep, level + 1);
      }
      if (options.indent) newline_indent(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.as_dict().entries) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_sep;
        if (options.indent) newline_indent(level + 1);
        append_json_string(out, entries[i]->first, options.ensure_ascii);
        out += key_sep;
        append_json(out, entries[i]->second, options, item_sep, key_sep, level + 1);
      }
      if (options.indent) newline_indent(level);
      out.push_back('}');
      return;
    }
    default:
      value_fail("TypeError: Object of type ", value.type_name(), " is not JSON serializable");
  }
}

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  std::string item_sep = options.indent ? "," : ", ";
  std::string key_sep = ": ";
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  }
  std::string out;
  append_json(out, value, options, item_sep, key_sep, 0);
  return out;
}

}  // namespace mi::chat
