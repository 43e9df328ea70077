#include "chat/template_operators.h"

#include <cmath>
#include <limits>

#include "chat/python_text.h"
#include "chat/template_error.h"
#include "chat/template_methods.h"

namespace mi::chat {

namespace {
thread_local ValueLimits current_limits;
}  // namespace

const ValueLimits& value_limits() { return current_limits; }
ScopedValueLimits::ScopedValueLimits(const ValueLimits& limits) : saved_(current_limits) { current_limits = limits; }
ScopedValueLimits::~ScopedValueLimits() { current_limits = saved_; }

void check_string_size(size_t bytes) {
  if (bytes > current_limits.max_string_bytes) {
    value_fail("MemoryError: string of ", std::to_string(bytes), " bytes exceeds the renderer's limit of ",
               std::to_string(current_limits.max_string_bytes));
  }
}

void check_list_size(size_t items) {
  if (items > current_limits.max_list_items) {
    value_fail("MemoryError: list of ", std::to_string(items), " items exceeds the renderer's limit of ",
               std::to_string(current_limits.max_list_items));
  }
}

int64_t require_int(const Value& value, const char* what) {
  value.require_defined();
  if (value.is_int() || value.is_bool()) return value.as_int();
  value_fail("TypeError: ", what, " must be an integer, not '", value.type_name(), "'");
}

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& left, const Value& right) {
  value_fail("TypeError: unsupported operand type(s) for ", op, ": '", left.type_name(), "' and '",
             right.type_name(), "'");
}

[[noreturn]] void overflow() { value_fail("OverflowError: integer result does not fit in 64 bits"); }
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat_sequence(const Value& sequence, int64_t times) {
  if (times <= 0) return sequence.is_string() ? Value::string("") : Value::list({}, sequence.is_tuple());
  if (sequence.is_string()) {
    const std::string& s = sequence.as_string();
    if (!s.empty() && static_cast<uint64_t>(times) > value_limits().max_string_bytes / s.size()) {
      check_string_size(value_limits().max_string_bytes + 1);
    }
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = sequence.as_list();
  if (!items.empty() && static_cast<uint64_t>(times) > value_limits().max_list_items / items.size()) {
    check_list_size(value_limits().max_list_items + 1);
  }
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), sequence.is_tuple());
}

// Python's floor division and modulo (results take the divisor's sign).
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) value_fail("ZeroDivisionError: integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) value_fail("OverflowError: integer result does not fit in 64 bits");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) value_fail("ZeroDivisionError: integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b) {
  if (b == 0.0) value_fail("ZeroDivisionError: float modulo");
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's float // (the quotient of divmod: exact remainder first, then rounded to the nearest integer).
double float_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

int64_t int_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = checked_mul(result, base);
    exponent >>= 1;
    if (exponent > 0) base = checked_mul(base, base);
  }
  return result;
}

// printf-style `format % args` for the conversions templates use: %s %r %d %i %f (with precision) and %%.
Value percent_format(const std::string& format, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.as_list() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) value_fail("ValueError: incomplete format");
    std::string precision;
    if (format[i] == '.') {
      ++i;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') precision.push_back(format[i++]);
      if (i >= format.size()) value_fail("ValueError: incomplete format");
    }
    const char conversion = format[i];
    if (conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= values.size()) value_fail("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    switch (conversion) {
      case 's': out += v.to_output(); break;
      case 'r': out += v.repr(); break;
      case 'd': case 'i':
        if (v.is_float()) out += std::to_string(static_cast<int64_t>(v.as_double()));
        else out += std::to_string(require_int(v, "%d format"));
        break;
      case 'f': {
        if (!v.is_number()) value_fail("TypeError: must be real number, not ", v.type_name());
        char buffer[512];
        const int digits = precision.empty() ? 6 : std::min(std::stoi(precision), 100);
        std::snprintf(buffer, sizeof buffer, "%.*f", digits, v.as_double());
        out += buffer;
        break;
      }
      default:
        value_fail("ValueError: unsupported format character '", std::string(1, conversion), "'");
    }
    check_string_size(out.size());
  }
  if (next < values.size()) value_fail("TypeError: not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

}  // namespace

Value binary_operation(const std::string& op, const Value& left, const Value& right) {
  left.require_defined();
  right.require_defined();
  const bool numbers = left.is_number() && right.is_number();
  const bool any_float = left.is_float() || right.is_float();
  if (op == "+") {
    if (numbers) {
      if (any_float) return Value::number(left.as_double() + right.as_double());
      return Value::integer(checked_add(left.as_int(), right.as_int()));
    }
    if (left.is_string() && right.is_string()) {
      check_string_size(left.as_string().size() + right.as_string().size());
      return Value::string(left.as_string() + right.as_string());
    }
    if (left.is_list() && right.is_list() && left.is_tuple() == right.is_tuple()) {
      check_list_size(left.as_list().size() + right.as_list().size());
      std::vector<Value> items = left.as_list();
      items.insert(items.end(), right.as_list().begin(), right.as_list().end());
      return Value::list(std::move(items), left.is_tuple());
    }
    if (left.is_string() || left.is_list()) {
      value_fail("TypeError: can only concatenate ", left.type_name(), " (not \"", right.type_name(), "\") to ",
                 left.type_name());
    }
    unsupported_operands(op, left, right);
  }
  if (op == "-") {
    if (!numbers) unsupported_operands(op, left, right);
    if (any_float) return Value::number(left.as_double() - right.as_double());
    return Value::integer(checked_sub(left.as_int(), right.as_int()));
  }
  if (op == "*") {
    if (numbers) {
      if (any_float) return Value::number(left.as_double() * right.as_double());
      return Value::integer(checked_mul(left.as_int(), right.as_int()));
    }
    if ((left.is_string() || left.is_list()) && (right.is_int() || right.is_bool())) {
      return repeat_sequence(left, right.as_int());
    }
    if ((right.is_string() || right.is_list()) && (left.is_int() || left.is_bool())) {
      return repeat_sequence(right, left.as_int());
    }
    if (left.is_string() || left.is_list() || right.is_string() || right.is_list()) {
      const Value& other = (left.is_string() || left.is_list()) ? right : left;
      value_fail("TypeError: can't multiply sequence by non-int of type '", other.type_name(), "'");
    }
    unsupported_operands(op, left, right);
  }
  if (op == "/") {
    if (!numbers) unsupported_operands(op, left, right);
    if (right.as_double() == 0.0) value_fail("ZeroDivisionError: division by zero");
    return Value::number(left.as_double() / right.as_double());
  }
  if (op == "//") {
    if (!numbers) unsupported_operands(op, left, right);
    if (!any_float) return Value::integer(floor_div(left.as_int(), right.as_int()));
    const double a = left.as_double();
    const double b = right.as_double();
    if (b == 0.0) value_fail("ZeroDivisionError: float floor division by zero");
    return Value::number(float_floor_div(a, b));
  }
  if (op == "%") {
    if (left.is_string()) return percent_format(left.as_string(), right);
    if (!numbers) unsupported_operands(op, left, right);
    if (!any_float) return Value::integer(floor_mod(left.as_int(), right.as_int()));
    return Value::number(float_mod(left.as_double(), right.as_double()));
  }
  if (op == "**") {
    if (!numbers) unsupported_operands("** or pow()", left, right);
    if (!any_float && right.as_int() >= 0) return Value::integer(int_power(left.as_int(), right.as_int()));
    if (left.as_double() == 0.0 && right.as_double() < 0) {
      value_fail("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    }
    return Value::number(std::pow(left.as_double(), right.as_double()));
  }
  value_fail("TypeError: unknown operator '", op, "'");
}

Value concat_operation(const Value& left, const Value& right) {
  std::string a = left.to_output();
  const std::string b = right.to_output();
  check_string_size(a.size() + b.size());
  return Value::string(a + b);
}

Value negate(const Value& operand) {
  operand.require_defined();
  if (operand.is_float()) return Value::number(-operand.as_double());
  if (operand.is_int() || operand.is_bool()) {
    if (operand.as_int() == std::numeric_limits<int64_t>::min()) {
      value_fail("OverflowError: integer result does not fit in 64 bits");
    }
    return Value::integer(-operand.as_int());
  }
  value_fail("TypeError: bad operand type for unary -: '", operand.type_name(), "'");
}

Value unary_plus(const Value& operand) {
  operand.require_defined();
  if (operand.is_float()) return operand;
  if (operand.is_int() || operand.is_bool()) return Value::integer(operand.as_int());
  value_fail("TypeError: bad operand type for unary +: '", operand.type_name(), "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;  // Undefined iterates as empty
    case Value::Kind::kString:
      if (!item.is_string()) {
        item.require_defined();
        value_fail("TypeError: 'in <string>' requires string as left operand, not ", item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.as_list()) {
        if (values_equal(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
      value_fail("TypeError: argument of type '", container.type_name(), "' is not iterable");
  }
}

bool compare(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return values_equal(left, right);
  if (op == "!=") return !values_equal(left, right);
  if (op == "<") return value_less(left, right, "<");
  if (op == ">") return value_less(right, left, ">");
  if (op == "<=") return value_less(left, right, "<=") || values_equal(left, right);
  if (op == ">=") return value_less(right, left, ">=") || values_equal(left, right);
  if (op == "in") return contains(right, left);
  if (op == "not in") return !contains(right, left);
  value_fail("TypeError: unknown comparison '", op, "'");
}

namespace {

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined("UndefinedError: " + py::repr_string(object.object_description()) + " has no attribute " +
                          py::repr_string(name));
}

// Python index normalization: negative counts from the end; returns false when out of range.
bool normalize_index(int64_t& index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  return index >= 0 && static_cast<uint64_t>(index) < size;
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  object.require_defined();
  if (object.is_namespace()) {
    const Value* found = object.as_namespace().attributes.find(name);
    return found ? *found : missing_attribute(object, name);
  }
  if (std::optional<Value> method = get_method(object, name)) return *method;
  if (object.is_dict()) {
    const Value* found = object.as_dict().find(name);
    if (found) return *found;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  object.require_defined();
  if (object.is_dict() && key.is_string()) {
    const Value* found = object.as_dict().find(key.as_string());
    if (found) return *found;
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t index = key.as_int();
    if (object.is_list()) {
      if (normalize_index(index, object.as_list().size())) return object.as_list()[static_cast<size_t>(index)];
    } else {
      const std::u32string cps = py::decode_utf8(object.as_string());
      if (normalize_index(index, cps.size())) {
        return Value::string(py::encode_utf8(std::u32string_view(cps).substr(static_cast<size_t>(index), 1)));
      }
    }
  } else if (object.is_namespace() && key.is_string()) {
    const Value* found = object.as_namespace().attributes.find(key.as_string());
    if (found) return *found;
  }
  if (key.is_string()) {
    if (std::optional<Value> method = get_method(object, key.as_string())) return *method;
    return missing_attribute(object, key.as_string());
  }
  return Value::undefined("UndefinedError: " + object.object_description() + " has no element " + key.repr());
}

Value get_slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  object.require_defined();
  auto bound = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    return require_int(*v, what);
  };
  const std::optional<int64_t> step_value = bound(step, "slice step");
  const int64_t s = step_value.value_or(1);
  if (s == 0) value_fail("ValueError: slice step cannot be zero");
  std::u32string cps;
  size_t size = 0;
  if (object.is_string()) {
    cps = py::decode_utf8(object.as_string());
    size = cps.size();
  } else if (object.is_list()) {
    size = object.as_list().size();
  } else {
    value_fail("TypeError: '", object.type_name(), "' object is not subscriptable");
  }
  const int64_t n = static_cast<int64_t>(size);
  // PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t default_value) {
    if (!v) return default_value;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= n) {
      x = s < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t begin = adjust(bound(start, "slice start"), s < 0 ? n - 1 : 0);
  const int64_t end = adjust(bound(stop, "slice stop"), s < 0 ? -1 : n);
  std::vector<size_t> picked;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) picked.push_back(static_cast<size_t>(i));
  if (object.is_string()) {
    std::u32string out;
    for (size_t i : picked) out.push_back(cps[i]);
    return Value::string(py::encode_utf8(out));
  }
  std::vector<Value> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(object.as_list()[i]);
  return Value::list(std::move(out), object.is_tuple());
}

std::vector<Value> iterate(const Value& iterable) {
  switch (iterable.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return iterable.as_list();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : iterable.as_dict().entries) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : py::decode_utf8(iterable.as_string())) {
        std::string one;
        py::append_utf8(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return chars;
    }
    default:
      value_fail("TypeError: '", iterable.type_name(), "' object is not iterable");
  }
}

int64_t length_of(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(py::code_point_count(value.as_string()));
    case Value::Kind::kList: return static_cast<int64_t>(value.as_list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(value.as_dict().entries.size());
    default:
      value_fail("TypeError: object of type '", value.type_name(), "' has no len()");
  }
}

}  // namespace mi::chat
