// The Unicode character properties the tokenizer's regex matcher and added-token matcher need, backed by utf8proc
// (Unicode 15.0 data).
#pragma once
#include <cstdint>
#include <string_view>

namespace mi::tok {

// One bit per Unicode General Category (bit index = utf8proc_category_t: Cn=0, Lu=1, Ll, Lt, Lm, Lo, Mn, Mc,
// Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co).
using CategoryMask = uint32_t;

CategoryMask category_bit(char32_t cp);

// Mask for a property name as written in \p{...}: a one-letter major class ("L", "N", ...), a two-letter
// category ("Lu", "Nd", ...), "LC"/"L&", or the long names ("Letter", "Number", "Uppercase_Letter", ...).
// Returns 0 for names it does not know (scripts, binary properties): the caller reports them as unsupported.
CategoryMask category_mask_for_name(std::string_view name);

inline constexpr CategoryMask kLetterMask = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5);
inline constexpr CategoryMask kMarkMask = (1u << 6) | (1u << 7) | (1u << 8);
inline constexpr CategoryMask kNumberMask = (1u << 9) | (1u << 10) | (1u << 11);
inline constexpr CategoryMask kDecimalNumberMask = 1u << 9;
inline constexpr CategoryMask kConnectorPunctuationMask = 1u << 12;

// The Unicode White_Space property: regex \s (as in Oniguruma, the engine of HF tokenizers; note that ECMAScript's
// \s differs: it adds U+FEFF and lacks U+0085) and added tokens' lstrip/rstrip (Rust's char::is_whitespace).
bool is_white_space(char32_t cp);

// Simple (one-to-one) case mappings.
char32_t to_lower(char32_t cp);
char32_t to_upper(char32_t cp);

}  // namespace mi::tok
