#include "gates/cpp_code_text.h"

#include <cctype>

namespace mi::gates {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Translation phase 2: a backslash immediately followed by a newline joins the two lines.
std::string without_splices(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (s[i] == '\\' && i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n') {
      i += 2;
      continue;
    }
    out += s[i];
  }
  return out;
}

// Skips a quoted literal whose opening quote is at s[i]; returns the index after its closing quote (or the end of the
// line for an unterminated one, as the compiler would stop there too).
std::size_t skip_quoted(const std::string& s, std::size_t i) {
  const char quote = s[i++];
  while (i < s.size() && s[i] != quote && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
  return i < s.size() && s[i] == quote ? i + 1 : i;
}

// Skips a raw string literal whose opening quote (after the R prefix) is at s[i]: R"delim( ... )delim".
std::size_t skip_raw(const std::string& s, std::size_t i) {
  const std::size_t open = s.find('(', i + 1);
  if (open == std::string::npos || open - i - 1 > 16) return skip_quoted(s, i);  // not a valid raw string opening
  const std::string close = ")" + s.substr(i + 1, open - i - 1) + "\"";
  const std::size_t end = s.find(close, open + 1);
  return end == std::string::npos ? s.size() : end + close.size();
}

}  // namespace

std::string cpp_code_text(const std::string& source) {
  const std::string s = without_splices(source);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      out += ' ';
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      out += ' ';
    } else if (ident_start(c)) {
      // An identifier, or the prefix of a literal: R"(...)", u8R"...", L"...", u'x', ...
      const std::size_t start = i;
      while (i < s.size() && ident_char(s[i])) ++i;
      const std::string word = s.substr(start, i - start);
      const bool raw = word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR";
      const bool prefix = word == "u8" || word == "u" || word == "U" || word == "L";
      if (i < s.size() && s[i] == '"' && raw) {
        i = skip_raw(s, i);
        out += "\"\"";
      } else if (i < s.size() && (s[i] == '"' || s[i] == '\'') && prefix) {
        out += s[i] == '"' ? "\"\"" : "''";
        i = skip_quoted(s, i);
      } else {
        out += word;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      // A number, with its digit separators (1'000'000 is not a character literal) and exponent signs.
      const std::size_t start = i;
      while (i < s.size()) {
        const char d = s[i];
        if ((d == '+' || d == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E' || s[i - 1] == 'p' || s[i - 1] == 'P')) ++i;
        else if (ident_char(d) || d == '.') ++i;
        else if (d == '\'' && i + 1 < s.size() && ident_char(s[i + 1])) ++i;
        else break;
      }
      out.append(s, start, i - start);
    } else if (c == '"' || c == '\'') {
      out += c == '"' ? "\"\"" : "''";
      i = skip_quoted(s, i);
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace mi::gates
