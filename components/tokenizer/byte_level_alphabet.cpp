#include "tokenizer/byte_level_alphabet.h"

#include "tokenizer/utf8.h"

namespace mi::tok {

const ByteLevelAlphabet& ByteLevelAlphabet::instance() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte_.fill(-1);
  auto stands_for_itself = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next_shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = stands_for_itself(b) ? static_cast<char32_t>(b) : next_shifted++;
    byte_to_char_[b] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
    append_utf8(byte_to_utf8_[b], c);
  }
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) out += byte_to_utf8_[static_cast<uint8_t>(ch)];
  return out;
}

}  // namespace mi::tok
