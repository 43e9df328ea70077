// Python `str` semantics on UTF-8 strings, as Jinja2 templates see them: lengths, indexes and slices count code
// points, whitespace is Python's str.isspace(), repr() quotes and escapes like CPython, floats print like
// float.__repr__. The interpreter stores strings as UTF-8 and converts to code points only where Python counts
// characters.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mi::chat::py {

// UTF-8 <-> code points. decode() maps each invalid byte to U+FFFD (input is validated before rendering, so
// this only matters for robustness).
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t code_point);
std::string encode_utf8(std::u32string_view code_points);
bool is_valid_utf8(std::string_view text);
size_t code_point_count(std::string_view text);

// str.isspace() for one code point (Unicode White_Space as CPython defines it, incl. U+001C..U+001F).
bool is_space(char32_t c);

// str.strip/lstrip/rstrip: `chars` absent = whitespace, present = the set of code points to remove.
std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
// str.split / str.rsplit with sep None (whitespace runs) or a non-empty separator; maxsplit < 0 = no limit.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
// str.replace(old, new, count) with count < 0 = all; an empty `old` inserts between code points like Python.
std::string replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count);

std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
std::string capitalize(std::string_view text);  // first code point upper, rest lower
std::string title(std::string_view text);       // Jinja's title filter: words start upper, rest lower

// repr(str): single quotes unless the text has a ' and no ", escapes \\ \n \r \t, the quote, and
// non-printable code points (\xhh, \uhhhh, \Uhhhhhhhh).
std::string repr_string(std::string_view text);
// float.__repr__: shortest round-trip digits, fixed notation for exponents -4..15, else 1e+16 style.
std::string repr_float(double value);

}  // namespace mi::chat::py
