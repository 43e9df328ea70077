// Every golden case of both reference tokenizers, byte for byte: encode without / with special tokens, decode,
// and the streaming decoder (equal to the full decode, valid UTF-8 after every token).
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer_test_util.h"

namespace mi::tok::testing {
namespace {

class GoldenCases : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCases, EncodeMatchesIds) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto cases = golden_cases(GetParam());
  ASSERT_GE(cases.size(), 30u);
  for (const GoldenCase& c : cases) {
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << GetParam() << " line " << c.line << ": " << c.text;
    EXPECT_EQ(tok->encode(c.text, true), c.ids_with_special) << GetParam() << " line " << c.line << ": " << c.text;
  }
}

TEST_P(GoldenCases, DecodeMatchesText) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  for (const GoldenCase& c : golden_cases(GetParam())) {
    EXPECT_EQ(tok->decode(c.ids), c.decoded) << GetParam() << " line " << c.line;
    EXPECT_EQ(tok->decode(c.ids_with_special), tok->decode(c.ids_with_special, false)) << "default keeps specials";
  }
}

TEST_P(GoldenCases, SkipSpecialDropsOnlySpecialTokens) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  for (const GoldenCase& c : golden_cases(GetParam())) {
    std::vector<int32_t> plain;
    for (const int32_t id : c.ids) {
      if (!tok->is_special(id)) plain.push_back(id);
    }
    EXPECT_EQ(tok->decode(c.ids, /*skip_special=*/true), tok->decode(plain)) << GetParam() << " line " << c.line;
  }
}

TEST_P(GoldenCases, StreamingDecodeEqualsFullDecode) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  for (const bool skip_special : {false, true}) {
    for (const GoldenCase& c : golden_cases(GetParam())) {
      StreamDecoder stream(*tok, skip_special);
      std::string text;
      for (const int32_t id : c.ids_with_special) {
        const std::string chunk = stream.feed(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << GetParam() << " line " << c.line << " after id " << id;
        text += chunk;
      }
      text += stream.finish();
      EXPECT_EQ(text, tok->decode(c.ids_with_special, skip_special)) << GetParam() << " line " << c.line;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, GoldenCases, ::testing::Values("qwen3", "llama3"));

}  // namespace
}  // namespace mi::tok::testing
