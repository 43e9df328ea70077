// The byte-level BPE alphabet (GPT-2, "Language Models are Unsupervised Multitask Learners", and Hugging Face's
// ByteLevel pre-tokenizer/decoder): every byte 0..255 is shown as one printable Unicode character so that
// vocabulary entries are plain strings. Printable Latin-1 bytes (0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF) stand for
// themselves; the other 68 bytes, in increasing order, become U+0100, U+0101, ... (so a space is 'Ġ' U+0120,
// a newline 'Ċ' U+010A).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mi::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& instance();

  char32_t char_for_byte(uint8_t byte) const { return byte_to_char_[byte]; }
  // The UTF-8 text of char_for_byte(byte), precomputed for the encoder's hot loop.
  const std::string& utf8_for_byte(uint8_t byte) const { return byte_to_utf8_[byte]; }
  // The byte a character stands for, or -1 if it is not in the alphabet.
  int byte_for_char(char32_t c) const { return c < char_to_byte_.size() ? char_to_byte_[c] : -1; }

  // Maps every byte of `bytes` to its character (UTF-8 encoded).
  std::string encode(std::string_view bytes) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> byte_to_char_{};
  std::array<std::string, 256> byte_to_utf8_{};
  std::array<int16_t, 0x144> char_to_byte_{};  // highest mapped character is U+0143
};

}  // namespace mi::tok
