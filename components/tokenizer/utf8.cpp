#include "tokenizer/utf8.h"

#include "common/error.h"

namespace mi::tok {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Table 3-7 of the Unicode Standard (well-formed UTF-8 byte sequences): for a lead byte, the sequence length
// and the allowed range of the *second* byte (later bytes are always 80..BF).
struct LeadInfo {
  int length = 0;  // 0: not a valid lead byte
  uint8_t second_lo = 0x80, second_hi = 0xBF;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1};
  if (b >= 0xC2 && b <= 0xDF) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0};
}

// How many bytes starting at `pos` are a valid (possibly truncated) prefix of a sequence; `complete` says whether
// the whole sequence is there.
size_t valid_prefix_length(std::string_view bytes, size_t pos, bool* complete) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(bytes[pos]));
  *complete = false;
  if (info.length == 0) return 0;
  size_t n = 1;
  for (; n < static_cast<size_t>(info.length); ++n) {
    if (pos + n >= bytes.size()) return n;
    const uint8_t b = static_cast<uint8_t>(bytes[pos + n]);
    const uint8_t lo = n == 1 ? info.second_lo : 0x80;
    const uint8_t hi = n == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return n;
  }
  *complete = true;
  return n;
}

}  // namespace

size_t decode_utf8_at(std::string_view bytes, size_t pos, char32_t* cp) {
  bool complete = false;
  const size_t n = valid_prefix_length(bytes, pos, &complete);
  if (!complete) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + pos);
  switch (n) {
    case 1: *cp = p[0]; break;
    case 2: *cp = (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
    case 3: *cp = (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
    default:
      *cp = (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
            (p[3] & 0x3F);
  }
  return n;
}

std::u32string decode_utf8_strict(std::string_view text, std::string_view what, std::vector<size_t>* byte_offsets) {
  std::u32string out;
  out.reserve(text.size());
  if (byte_offsets) {
    byte_offsets->clear();
    byte_offsets->reserve(text.size() + 1);
  }
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const auto b = static_cast<uint8_t>(text[pos]);
    size_t n = 1;
    if (b < 0x80) {
      cp = b;  // fast path for ASCII
    } else {
      n = decode_utf8_at(text, pos, &cp);
      if (n == 0) fail(what, ": not valid UTF-8 at byte ", pos);
    }
    if (byte_offsets) byte_offsets->push_back(pos);
    out.push_back(cp);
    pos += n;
  }
  if (byte_offsets) byte_offsets->push_back(text.size());
  return out;
}

void validate_utf8(std::string_view text, std::string_view what) {
  size_t pos = 0;
  char32_t cp = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = decode_utf8_at(text, pos, &cp);
    if (n == 0) fail(what, ": not valid UTF-8 at byte ", pos);
    pos += n;
  }
}

size_t incomplete_utf8_suffix_length(std::string_view bytes) {
  // A sequence is at most 4 bytes, so an incomplete one starts within the last 3 bytes.
  const size_t lookback = bytes.size() < 3 ? bytes.size() : 3;
  for (size_t k = lookback; k >= 1; --k) {
    const size_t start = bytes.size() - k;
    bool complete = false;
    const size_t n = valid_prefix_length(bytes, start, &complete);
    if (!complete && n == k) return k;  // all k trailing bytes are a valid, unfinished prefix
  }
  return 0;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      out.push_back(bytes[pos++]);
      continue;
    }
    bool complete = false;
    const size_t n = valid_prefix_length(bytes, pos, &complete);
    if (complete) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      append_utf8(out, kReplacementChar);  // one U+FFFD per maximal ill-formed subpart
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

}  // namespace mi::tok
