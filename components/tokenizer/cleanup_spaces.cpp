#include "tokenizer/cleanup_spaces.h"

#include <utility>

namespace mi::tok {

namespace {

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  if (text.find(from) == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, pos)) {
    out.append(text, pos, at - pos);
    out.append(to);
    pos = at + from.size();
  }
  out.append(text, pos, std::string::npos);
  return out;
}

// Two adjacent non-space characters that some rule's pattern contains ("n't", "'m", "'s", "'ve", "'re").
bool pattern_pair(char left, char right) {
  return left == '\'' || right == '\'' || (right == 'e' && (left == 'v' || left == 'r'));
}

}  // namespace

std::string clean_up_tokenization_spaces(std::string_view text) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"},
  };
  std::string out(text);
  for (const auto& [from, to] : kRules) out = replace_all(std::move(out), from, to);
  return out;
}

size_t last_cleanup_safe_split(std::string_view text) {
  for (size_t p = text.size(); p-- > 1;) {
    const char left = text[p - 1], right = text[p];
    if ((static_cast<unsigned char>(right) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
    if (left == ' ' || right == ' ' || pattern_pair(left, right)) continue;
    return p;
  }
  return 0;
}

}  // namespace mi::tok
