#include "tokenizer/unicode_props.h"

#include <array>
#include <string>

#include <utf8proc.h>

namespace mi::tok {

namespace {

std::array<CategoryMask, 128> make_ascii_table() {
  std::array<CategoryMask, 128> table{};
  for (int c = 0; c < 128; ++c) table[c] = 1u << utf8proc_category(c);
  return table;
}

}  // namespace

CategoryMask category_bit(char32_t cp) {
  static const std::array<CategoryMask, 128> ascii = make_ascii_table();
  if (cp < 128) return ascii[cp];
  // Unicode 15.1 (after utf8proc's 15.0 data) added CJK Unified Ideographs Extension I as Lo.
  if (cp >= 0x2EBF0 && cp <= 0x2EE5D) return 1u << UTF8PROC_CATEGORY_LO;
  return 1u << utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

CategoryMask category_mask_for_name(std::string_view name) {
  struct Named {
    const char* short_name;
    const char* long_name;
    CategoryMask mask;
  };
  static const Named kNames[] = {
      {"L", "Letter", kLetterMask},
      {"LC", "Cased_Letter", (1u << 1) | (1u << 2) | (1u << 3)},
      {"L&", "Cased_Letter", (1u << 1) | (1u << 2) | (1u << 3)},
      {"Lu", "Uppercase_Letter", 1u << 1},
      {"Ll", "Lowercase_Letter", 1u << 2},
      {"Lt", "Titlecase_Letter", 1u << 3},
      {"Lm", "Modifier_Letter", 1u << 4},
      {"Lo", "Other_Letter", 1u << 5},
      {"M", "Mark", kMarkMask},
      {"Mn", "Nonspacing_Mark", 1u << 6},
      {"Mc", "Spacing_Mark", 1u << 7},
      {"Me", "Enclosing_Mark", 1u << 8},
      {"N", "Number", kNumberMask},
      {"Nd", "Decimal_Number", 1u << 9},
      {"Nl", "Letter_Number", 1u << 10},
      {"No", "Other_Number", 1u << 11},
      {"P", "Punctuation", 0x7Fu << 12},
      {"Pc", "Connector_Punctuation", 1u << 12},
      {"Pd", "Dash_Punctuation", 1u << 13},
      {"Ps", "Open_Punctuation", 1u << 14},
      {"Pe", "Close_Punctuation", 1u << 15},
      {"Pi", "Initial_Punctuation", 1u << 16},
      {"Pf", "Final_Punctuation", 1u << 17},
      {"Po", "Other_Punctuation", 1u << 18},
      {"S", "Symbol", 0xFu << 19},
      {"Sm", "Math_Symbol", 1u << 19},
      {"Sc", "Currency_Symbol", 1u << 20},
      {"Sk", "Modifier_Symbol", 1u << 21},
      {"So", "Other_Symbol", 1u << 22},
      {"Z", "Separator", 0x7u << 23},
      {"Zs", "Space_Separator", 1u << 23},
      {"Zl", "Line_Separator", 1u << 24},
      {"Zp", "Paragraph_Separator", 1u << 25},
      {"C", "Other", (1u << 0) | (0xFu << 26)},
      {"Cc", "Control", 1u << 26},
      {"Cf", "Format", 1u << 27},
      {"Cs", "Surrogate", 1u << 28},
      {"Co", "Private_Use", 1u << 29},
      {"Cn", "Unassigned", 1u << 0},
  };
  // Accept "General_Category=X" / "gc=X" too.
  for (const std::string_view prefix : {"General_Category=", "gc="}) {
    if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  }
  for (const Named& n : kNames) {
    if (name == n.short_name || name == n.long_name) return n.mask;
  }
  return 0;
}

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

char32_t to_lower(char32_t cp) {
  if (cp < 128) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

char32_t to_upper(char32_t cp) {
  if (cp < 128) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}

}  // namespace mi::tok
