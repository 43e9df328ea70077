// The value type of the chat-template interpreter: what a Jinja2 expression evaluates to when the inputs come
// from JSON (messages, tools) and template literals.
//
// Python semantics are kept where a rendered prompt depends on them: str() of None/True/1.0/lists/dicts, ==
// between 1 and 1.0 and True, truthiness of empty containers, dict key order (insertion order, hence
// nlohmann::ordered_json on input), and Jinja2's Undefined (renders empty, iterates empty, is falsy, but any
// attribute access, call or arithmetic on it is an error whose message says what was undefined).
//
// Lists and dicts are immutable once built (the reference renderer is Jinja2's ImmutableSandboxedEnvironment,
// which forbids list.append and friends) and shared by pointer; the one mutable thing is namespace(), whose
// attributes `{% set ns.x = ... %}` assigns.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::chat {

class Value;

// Deepest list/dict nesting a value may have: keeps recursive printing and destruction off deep stacks.
inline constexpr int kMaxValueNesting = 200;

struct List {
  std::vector<Value> items;
  int depth = 1;          // 1 + deepest nested list/dict among items
  bool is_tuple = false;  // a Python tuple: (1, 2), dict items; prints with parentheses, dumps as a JSON array
};

struct Dict {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order, keys unique
  int depth = 1;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place, else appends
};

struct Namespace {
  Dict attributes;
};

// Arguments of a call: positional then keyword (`f(1, x=2)`).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;  // for messages: "raise_exception", "str.startswith", a macro's name
  std::function<Value(const CallArgs&)> call;
};

// Jinja2's default Undefined. `hint` is the error an operation on it raises, e.g. "UndefinedError: 'x' is
// undefined" or "UndefinedError: 'dict object' has no attribute 'content'".
struct Undefined {
  std::string hint;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() : storage_(Undefined{"UndefinedError: value is undefined"}) {}
  static Value undefined(std::string hint) { return Value(Storage(Undefined{std::move(hint)})); }
  static Value none() { return Value(Storage(nullptr)); }
  static Value boolean(bool b) { return Value(Storage(b)); }
  static Value integer(int64_t i) { return Value(Storage(i)); }
  static Value number(double d) { return Value(Storage(d)); }
  static Value string(std::string s) { return Value(Storage(std::move(s))); }
  static Value list(std::vector<Value> items, bool is_tuple = false);  // ValueError beyond kMaxValueNesting
  static Value dict(Dict dict);
  static Value new_namespace(Dict attributes);
  static Value callable(std::string name, std::function<Value(const CallArgs&)> call);
  // JSON input (messages, tools, extra variables); object key order is kept.
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(storage_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }  // list or tuple
  bool is_tuple() const;
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  const std::string& undefined_hint() const { return std::get<Undefined>(storage_).hint; }
  bool as_bool() const { return std::get<bool>(storage_); }
  int64_t as_int() const;      // int or bool
  double as_double() const;    // int, bool or float
  const std::string& as_string() const { return std::get<std::string>(storage_); }
  const std::vector<Value>& as_list() const { return std::get<std::shared_ptr<const List>>(storage_)->items; }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(storage_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(storage_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(storage_); }
  int nesting_depth() const;  // 0 for scalars

  // Python's type(x).__name__ ("NoneType", "str", "dict", ...), used in error messages.
  std::string type_name() const;
  // Jinja2's "'dict object'" style description of the value for undefined-attribute messages.
  std::string object_description() const;

  bool truthy() const;
  // What `{{ x }}` prints: str(x), with Undefined as "".
  std::string to_output() const;
  // repr(x), as used inside str() of lists and dicts.
  std::string repr() const;

  // Raises the Undefined's error (UndefinedError) if this is undefined; returns *this otherwise.
  const Value& require_defined() const;

 private:
  using Storage = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
                               std::shared_ptr<const Callable>>;
  explicit Value(Storage storage) : storage_(std::move(storage)) {}
  Storage storage_;
};

// Python == (1 == 1.0 == True, lists element-wise, dicts regardless of order, Undefined == Undefined).
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings (code point order), lists lexicographically; otherwise a TypeError naming `op`.
bool value_less(const Value& a, const Value& b, const char* op);

// json.dumps(x, ensure_ascii=..., indent=..., separators=..., sort_keys=...) as the `tojson` filter of Hugging
// Face's chat-template environment calls it. indent: nullopt = single line; a number of spaces or a string.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key); default depends on indent
  bool sort_keys = false;
};
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace mi::chat
