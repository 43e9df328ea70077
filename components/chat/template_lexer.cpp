#include "chat/template_lexer.h"

#include <algorithm>
#include <cstdio>

#include "chat/python_text.h"

namespace mi::chat {

TemplateError::TemplateError(SourcePos p, const std::string& message)
    : mi::Error("line " + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + message), pos(p) {}

namespace {

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
size_t utf8_length(unsigned char lead) { return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1; }

// Python-regex \s strip of data around `-` tags (Unicode whitespace).
std::string rstrip_whitespace(const std::string& text) {
  std::u32string cps = py::decode_utf8(text);
  while (!cps.empty() && py::is_space(cps.back())) cps.pop_back();
  return py::encode_utf8(cps);
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw_source) {
    // Newline normalization and the dropped trailing newline (Jinja2: newline_sequence, keep_trailing_newline).
    source_.reserve(raw_source.size());
    for (size_t i = 0; i < raw_source.size(); ++i) {
      if (raw_source[i] == '\r') {
        source_.push_back('\n');
        if (i + 1 < raw_source.size() && raw_source[i + 1] == '\n') ++i;
      } else {
        source_.push_back(raw_source[i]);
      }
    }
    if (!source_.empty() && source_.back() == '\n') source_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_data(source_.substr(pos_), pos_);
        pos_ = source_.size();
        break;
      }
      lex_tag(tag);
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", position(source_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos position(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line_index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    return SourcePos{static_cast<int>(line_index + 1), static_cast<int>(offset - line_starts_[line_index] + 1)};
  }

  [[noreturn]] void error_at(size_t offset, const std::string& message) const {
    throw TemplateError(position(offset), message);
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = from; i + 1 < source_.size(); ++i) {
      if (source_[i] == '{' && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_data(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kData, std::move(text), position(offset)});
  }

  // lstrip_blocks: drop spaces/tabs between the last line start and the tag.
  std::string lstrip_line(std::string text, size_t data_start) const {
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    const bool at_line_start = newline != std::string::npos || data_start == 0 || source_[data_start - 1] == '\n';
    if (!at_line_start || line_begin == text.size()) return text;
    for (size_t i = line_begin; i < text.size(); ++i) {
      if (!is_ascii_space(text[i])) return text;
    }
    text.resize(line_begin);
    return text;
  }

  // After a tag: `-` strips all following whitespace; otherwise trim_blocks drops one newline after
  // block and comment tags unless the tag ended with `+`.
  void after_tag(char right_modifier, bool is_block_or_comment) {
    if (right_modifier == '-') {
      while (pos_ < source_.size()) {
        const size_t len = utf8_length(static_cast<unsigned char>(source_[pos_]));
        const std::u32string cp = py::decode_utf8(std::string_view(source_).substr(pos_, len));
        if (cp.size() != 1 || !py::is_space(cp[0])) break;
        pos_ += len;
      }
    } else if (is_block_or_comment && right_modifier != '+' && pos_ < source_.size() && source_[pos_] == '\n') {
      ++pos_;
    }
  }

  void lex_tag(size_t tag) {
    const char kind = source_[tag + 1];
    size_t inner = tag + 2;
    const char left_modifier = inner < source_.size() && (source_[inner] == '-' || source_[inner] == '+')
                                   ? source_[inner]
                                   : '\0';
    if (left_modifier) ++inner;
    std::string data = source_.substr(pos_, tag - pos_);
    if (left_modifier == '-') {
      data = rstrip_whitespace(data);
    } else if (kind != '{' && left_modifier != '+') {
      data = lstrip_line(std::move(data), pos_);
    }
    emit_data(std::move(data), pos_);

    if (kind == '#') {
      const size_t close = source_.find("#}", inner);
      if (close == std::string::npos) error_at(tag, "unclosed comment: missing '#}'");
      const char right_modifier = close > inner && (source_[close - 1] == '-' || source_[close - 1] == '+')
                                      ? source_[close - 1]
                                      : '\0';
      pos_ = close + 2;
      after_tag(right_modifier, true);
      return;
    }
    const bool is_block = kind == '%';
    tokens_.push_back(Token{is_block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, "", position(tag)});
    pos_ = inner;
    const char right_modifier = lex_tag_contents(tag, is_block);
    after_tag(right_modifier, is_block);
  }

  // Lexes expression tokens up to the closing delimiter; returns its modifier ('-', '+' or '\0').
  char lex_tag_contents(size_t tag, bool is_block) {
    const char* close = is_block ? "%}" : "}}";
    std::vector<char> brackets;
    while (true) {
      while (pos_ < source_.size() && is_ascii_space(source_[pos_])) ++pos_;
      if (pos_ >= source_.size()) {
        error_at(tag, std::string("unclosed tag: missing '") + close + "' before the end of the template");
      }
      const std::string_view rest = std::string_view(source_).substr(pos_);
      if (brackets.empty()) {
        char modifier = '\0';
        size_t skip = 0;
        if ((rest.size() >= 3 && (rest[0] == '-' || (is_block && rest[0] == '+'))) && rest.substr(1, 2) == close) {
          modifier = rest[0];
          skip = 3;
        } else if (rest.substr(0, 2) == close) {
          skip = 2;
        }
        if (skip) {
          tokens_.push_back(Token{is_block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, "", position(pos_)});
          pos_ += skip;
          return modifier;
        }
      }
      lex_token(brackets);
    }
  }

  void lex_token(std::vector<char>& brackets) {
    const size_t start = pos_;
    const char c = source_[pos_];
    if (is_name_start(c)) {
      while (pos_ < source_.size() && is_name_char(source_[pos_])) ++pos_;
      tokens_.push_back(Token{TokenKind::kName, source_.substr(start, pos_ - start), position(start)});
      return;
    }
    if (is_digit(c)) {
      lex_number();
      return;
    }
    if (c == '\'' || c == '"') {
      lex_string();
      return;
    }
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (source_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        tokens_.push_back(Token{TokenKind::kOperator, op, position(start)});
        return;
      }
    }
    static const std::string kOneChar = "+-*/%~<>=()[]{},.:|";
    if (kOneChar.find(c) == std::string::npos) {
      if (static_cast<unsigned char>(c) >= 0x80) error_at(start, "unexpected non-ASCII character in a tag");
      error_at(start, std::string("unexpected character '") + c + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : (c == ']' ? '[' : '{');
      if (brackets.empty() || brackets.back() != open) error_at(start, std::string("unexpected '") + c + "'");
      brackets.pop_back();
    }
    ++pos_;
    tokens_.push_back(Token{TokenKind::kOperator, std::string(1, c), position(start)});
  }

  // Digits with optional `_` separators (Jinja2 integer_re / float_re): 12, 1_000, 1.5, 1e3, 2.5E-3.
  std::string take_digits() {
    std::string digits;
    while (pos_ < source_.size() && (is_digit(source_[pos_]) ||
                                     (source_[pos_] == '_' && pos_ + 1 < source_.size() && is_digit(source_[pos_ + 1]) &&
                                      !digits.empty()))) {
      if (source_[pos_] != '_') digits.push_back(source_[pos_]);
      ++pos_;
    }
    return digits;
  }

  void lex_number() {
    const size_t start = pos_;
    std::string text = take_digits();
    bool is_float = false;
    if (pos_ + 1 < source_.size() && source_[pos_] == '.' && is_digit(source_[pos_ + 1])) {
      ++pos_;
      text += "." + take_digits();
      is_float = true;
    }
    if (pos_ < source_.size() && (source_[pos_] == 'e' || source_[pos_] == 'E')) {
      size_t look = pos_ + 1;
      if (look < source_.size() && (source_[look] == '+' || source_[look] == '-')) ++look;
      if (look < source_.size() && is_digit(source_[look])) {
        text += "e";
        if (source_[pos_ + 1] == '-') text += "-";
        pos_ = look;
        text += take_digits();
        is_float = true;
      }
    }
    if (!is_float && text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos) {
      error_at(start, "leading zeros in an integer literal ('" + text + "')");  // as in Jinja2 and Python
    }
    tokens_.push_back(Token{is_float ? TokenKind::kFloat : TokenKind::kInteger, text, position(start)});
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // String literal with Python's unicode-escape rules (what Jinja2 applies to literals).
  void lex_string() {
    const size_t start = pos_;
    const char quote = source_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= source_.size()) error_at(start, "unterminated string literal");
      const char c = source_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        value.push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= source_.size()) error_at(start, "unterminated string literal");
      const char e = source_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': value.push_back('\\'); break;
        case '\'': value.push_back('\''); break;
        case '"': value.push_back('"'); break;
        case 'a': value.push_back('\a'); break;
        case 'b': value.push_back('\b'); break;
        case 'f': value.push_back('\f'); break;
        case 'n': value.push_back('\n'); break;
        case 'r': value.push_back('\r'); break;
        case 't': value.push_back('\t'); break;
        case 'v': value.push_back('\v'); break;
        case 'x': case 'u': case 'U': {
          const int width = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t code = 0;
          for (int i = 0; i < width; ++i) {
            const int digit = pos_ < source_.size() ? hex_value(source_[pos_]) : -1;
            if (digit < 0) error_at(start, std::string("truncated \\") + e + " escape in string literal");
            code = code * 16 + static_cast<uint32_t>(digit);
            ++pos_;
          }
          if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
            error_at(start, "escape in string literal is not a valid Unicode scalar value");
          }
          py::append_utf8(value, static_cast<char32_t>(code));
          break;
        }
        case 'N': error_at(start, "\\N{...} escapes are not supported in string literals");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t code = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < source_.size() && source_[pos_] >= '0' && source_[pos_] <= '7'; ++i) {
              code = code * 8 + static_cast<uint32_t>(source_[pos_++] - '0');
            }
            py::append_utf8(value, static_cast<char32_t>(code));
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // Jinja2 decodes literals with s.encode("ascii", "backslashreplace").decode("unicode-escape"):
            // a backslash before a non-ASCII character keeps the backslash and spells the character as
            // its escape (\é -> \\xe9 -> the four characters \xe9).
            --pos_;
            const size_t len = utf8_length(static_cast<unsigned char>(e));
            const std::u32string cp = py::decode_utf8(std::string_view(source_).substr(pos_, len));
            pos_ += len;
            char buffer[16];
            const unsigned c = cp.empty() ? 0xFFFD : static_cast<unsigned>(cp[0]);
            if (c <= 0xFF) std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
            else if (c <= 0xFFFF) std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
            else std::snprintf(buffer, sizeof buffer, "\\U%08x", c);
            value += buffer;
          } else {
            value.push_back('\\');  // unknown escapes stay as written, like Python
            --pos_;
          }
      }
    }
    tokens_.push_back(Token{TokenKind::kString, std::move(value), position(start)});
  }

  std::string source_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace mi::chat
