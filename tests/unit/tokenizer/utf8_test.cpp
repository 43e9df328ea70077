// UTF-8 helpers: strict decoding, the lossy conversion used by decode (one U+FFFD per maximal ill-formed
// subpart, Unicode §3.9), and the incomplete-suffix detection the streaming decoder relies on.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tokenizer/byte_level_alphabet.h"
#include "tokenizer/utf8.h"

namespace mi::tok {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("plain ascii"), "plain ascii");
  EXPECT_EQ(utf8_lossy("\xE4\xBD\xA0\xF0\x9F\x98\x80"), "\xE4\xBD\xA0\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98" "A"), kFFFD + "A");              // truncated 4-byte sequence: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFFFD + kFFFD);                    // overlong lead, stray continuation
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);        // surrogate
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
  EXPECT_EQ(utf8_lossy("a\xFF" "b\xE2\x82"), "a" + kFFFD + "b" + kFFFD);
}

TEST(Utf8, IncompleteSuffix) {
  EXPECT_EQ(incomplete_utf8_suffix_length(""), 0u);
  EXPECT_EQ(incomplete_utf8_suffix_length("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix_length("abc\xE2"), 1u);
  EXPECT_EQ(incomplete_utf8_suffix_length("abc\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix_length("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix_length("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix_length("\x80"), 0u);      // can never become valid: not held
  EXPECT_EQ(incomplete_utf8_suffix_length("\xE2\x82" "A"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix_length("\xED\xA0"), 0u);  // would be a surrogate
}

TEST(Utf8, StrictDecodingNamesTheOffset) {
  std::vector<size_t> offsets;
  EXPECT_EQ(decode_utf8_strict("a\xC3\xA9z", "t", &offsets), U"a\u00E9z");
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 1, 3, 4}));
  try {
    decode_utf8_strict("ok\xC3(", "input text");
    FAIL() << "accepted invalid UTF-8";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("input text: not valid UTF-8 at byte 2"), std::string::npos) << e.what();
  }
}

TEST(ByteLevelAlphabet, MatchesGpt2Mapping) {
  const auto& a = ByteLevelAlphabet::instance();
  EXPECT_EQ(a.char_for_byte(' '), U'\u0120');   // Ġ
  EXPECT_EQ(a.char_for_byte('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(a.char_for_byte('A'), U'A');
  EXPECT_EQ(a.char_for_byte(0xAD), U'\u0143');  // soft hyphen byte, the last shifted one
  EXPECT_EQ(a.char_for_byte(0xE4), U'\u00E4');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(a.byte_for_char(a.char_for_byte(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(a.byte_for_char(U'\u0144'), -1);
  EXPECT_EQ(a.byte_for_char(U'\u4F60'), -1);
}

}  // namespace
}  // namespace mi::tok
