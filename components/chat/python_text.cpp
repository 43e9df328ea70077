#include "chat/python_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "chat/template_error.h"

namespace mi::chat::py {

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t pos = 0;
  const auto size = static_cast<utf8proc_ssize_t>(text.size());
  while (pos < size) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, size - pos, &cp);
    if (n <= 0) {
      out.push_back(U'\uFFFD');
      ++pos;
    } else {
      out.push_back(static_cast<char32_t>(cp));
      pos += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) append_utf8(out, c);
  return out;
}

bool is_valid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t pos = 0;
  const auto size = static_cast<utf8proc_ssize_t>(text.size());
  while (pos < size) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + pos, size - pos, &cp);
    if (n <= 0) return false;
    pos += n;
  }
  return true;
}

size_t code_point_count(std::string_view text) {
  size_t count = 0;
  for (unsigned char byte : text) {
    if ((byte & 0xC0) != 0x80) ++count;  // count lead bytes (valid UTF-8 assumed)
  }
  return count;
}

// CPython's _PyUnicode_IsWhitespace: bidirectional class WS, B or S, or category Zs.
bool is_space(char32_t c) {
  if (c >= 0x09 && c <= 0x0D) return true;
  if (c >= 0x1C && c <= 0x20) return true;
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string cps = decode_utf8(text);
  const std::u32string strip_set = chars ? decode_utf8(*chars) : std::u32string();
  auto removable = [&](char32_t c) {
    return chars ? strip_set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && removable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && removable(cps[end - 1])) --end;
  }
  return encode_utf8(std::u32string_view(cps).substr(begin, end - begin));
}

namespace {

std::vector<std::string> split_whitespace(std::string_view text, int64_t maxsplit) {
  const std::u32string cps = decode_utf8(text);
  std::vector<std::string> parts;
  size_t i = 0;
  const size_t n = cps.size();
  while (i < n) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(encode_utf8(std::u32string_view(cps).substr(i)));  // the rest, trailing space kept
      break;
    }
    const size_t start = i;
    while (i < n && !is_space(cps[i])) ++i;
    parts.push_back(encode_utf8(std::u32string_view(cps).substr(start, i - start)));
  }
  return parts;
}

std::vector<std::string> rsplit_whitespace(std::string_view text, int64_t maxsplit) {
  const std::u32string cps = decode_utf8(text);
  std::vector<std::string> parts;
  size_t i = cps.size();
  while (i > 0) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(encode_utf8(std::u32string_view(cps).substr(0, i)));
      break;
    }
    const size_t end = i;
    while (i > 0 && !is_space(cps[i - 1])) --i;
    parts.push_back(encode_utf8(std::u32string_view(cps).substr(i, end - i)));
  }
  return {parts.rbegin(), parts.rend()};
}

}  // namespace

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(text, maxsplit);
  if (sep->empty()) value_fail("ValueError: empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = text.find(*sep, start);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(text.substr(start, hit - start));
    start = hit + sep->size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return rsplit_whitespace(text, maxsplit);
  if (sep->empty()) value_fail("ValueError: empty separator");
  std::vector<std::string> parts;
  size_t end = text.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = text.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  parts.emplace_back(text.substr(0, end));
  return {parts.rbegin(), parts.rend()};
}

std::string replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end, up to `count` times.
    const std::u32string cps = decode_utf8(text);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = text.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out += text.substr(start, hit - start);
    out += new_text;
    start = hit + old_text.size();
    ++done;
  }
  out += text.substr(start);
  return out;
}

std::string to_upper(std::string_view text) {
  std::string out;
  for (char32_t c : decode_utf8(text)) append_utf8(out, static_cast<char32_t>(utf8proc_toupper(c)));
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out;
  for (char32_t c : decode_utf8(text)) append_utf8(out, static_cast<char32_t>(utf8proc_tolower(c)));
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (char32_t c : decode_utf8(text)) {
    append_utf8(out, static_cast<char32_t>(first ? utf8proc_toupper(c) : utf8proc_tolower(c)));
    first = false;
  }
  return out;
}

std::string title(std::string_view text) {
  // Jinja's title filter: a word starts after whitespace or one of - ( { [ <.
  std::string out;
  bool word_start = true;
  for (char32_t c : decode_utf8(text)) {
    const bool separator = is_space(c) || c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<';
    if (separator) {
      append_utf8(out, c);
      word_start = true;
    } else {
      append_utf8(out, static_cast<char32_t>(word_start ? utf8proc_toupper(c) : utf8proc_tolower(c)));
      word_start = false;
    }
  }
  return out;
}

namespace {

// str.isprintable(): everything except categories Cc Cf Cs Co Cn Zl Zp and Zs other than the ASCII space.
bool is_printable(char32_t c) {
  if (c == U' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string repr_string(std::string_view text) {
  const std::u32string cps = decode_utf8(text);
  const bool has_single = cps.find(U'\'') != std::u32string::npos;
  const bool has_double = cps.find(U'"') != std::u32string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buffer[16];
  for (char32_t c : cps) {
    if (c == static_cast<char32_t>(quote) || c == U'\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
      out += buffer;
    } else if (c < 0x80 || is_printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xFF) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
      out += buffer;
    } else if (c <= 0xFFFF) {
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      std::snprintf(buffer, sizeof buffer, "\\U%08x", static_cast<unsigned>(c));
      out += buffer;
    }
  }
  out.push_back(quote);
  return out;
}

std::string repr_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form "d.ddde±XX", then laid out as CPython's repr does
  // (Python/pystrtod.c, format code 'r': scientific when the decimal exponent is < -4 or >= 16).
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  const std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::snprintf(buffer, sizeof buffer, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
    return out + buffer;
  }
  const int point = exponent + 1;  // digits before the decimal point
  std::string out = sign;
  if (point <= 0) {
    out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
  }
  return out;
}

}  // namespace mi::chat::py
