// The one error type of metainfer components and toolkit. Messages name the file, the field and what was
// expected, so a user can fix their input without reading code ("config.json: field 'hidden_size': expected a
// positive integer, got \"abc\"").
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace mi {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

inline std::string to_message_part(const std::string& s) { return s; }
inline std::string to_message_part(const char* s) { return s; }
inline std::string to_message_part(std::string_view s) { return std::string(s); }
template <class T>
  requires std::is_integral_v<T>
std::string to_message_part(T v) { return std::to_string(v); }
template <class T>
  requires std::is_floating_point_v<T>
std::string to_message_part(T v) {  // shortest round-trip-ish form: 1e-06, 0.5, 4096
  std::ostringstream out;
  out << v;
  return out.str();
}

// Throws mi::Error with the pieces concatenated: fail("config.json: field '", name, "': expected ...").
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::string message;
  ((message += to_message_part(parts)), ...);
  throw Error(message);
}


}  // namespace mi
