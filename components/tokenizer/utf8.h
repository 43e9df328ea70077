// UTF-8 helpers for the tokenizer: strict decoding of input text into code points, encoding, and the
// "lossy" conversion of decoded bytes into valid UTF-8 that detokenization needs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mi::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

// Length of the valid UTF-8 sequence starting at `bytes[pos]`, or 0 if the bytes there are not a complete, valid
// sequence (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). On success `*cp` gets the code point.
size_t decode_utf8_at(std::string_view bytes, size_t pos, char32_t* cp);

// Decodes `text` (which must be valid UTF-8) into code points; `byte_offsets` (if given) gets, for each code
// point, its byte offset in `text`, plus a final entry equal to text.size(). Throws mi::Error naming the byte
// offset of the first invalid sequence, prefixed by `what` (e.g. "tokenizer: input text").
std::u32string decode_utf8_strict(std::string_view text, std::string_view what,
                                  std::vector<size_t>* byte_offsets = nullptr);

// Throws mi::Error (prefixed by `what`, naming the byte offset) unless `text` is valid UTF-8. No allocation.
void validate_utf8(std::string_view text, std::string_view what);

// Number of bytes at the end of `bytes` that form an incomplete but so-far valid UTF-8 sequence (a prefix that
// more bytes could complete), 0..3. A streaming decoder holds these back.
size_t incomplete_utf8_suffix_length(std::string_view bytes);

// Converts arbitrary bytes into valid UTF-8: every maximal ill-formed subpart is replaced by one U+FFFD
// (the Unicode Standard §3.9 "U+FFFD Substitution of Maximal Subparts", the policy of Rust's
// String::from_utf8_lossy that Hugging Face's ByteLevel decoder uses).
std::string utf8_lossy(std::string_view bytes);

}  // namespace mi::tok
