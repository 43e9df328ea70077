// Every golden case of both reference tokenizers, byte for byte: encode without / with special tokens, decode,
// and the streaming decoder (equal to the full decode, valid UTF-8 after every token).
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer_test_util.h"

namespace mi::tok::testing {
namespace {

// Parameter: (case suite, tokenizer family).
class GoldenCases : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::string family() const { return std::get<1>(GetParam()); }
  std::vector<GoldenCase> cases() const { return cases_of(std::get<0>(GetParam()), family()); }
};

TEST_P(GoldenCases, EncodeMatchesIds) {
  const Tokenizer* tok = reference_tokenizer(family());
  ASSERT_NE(tok, nullptr);
  const auto all = cases();
  ASSERT_GE(all.size(), 30u);  // both suites have more; fewer means a truncated file
  for (const GoldenCase& c : all) {
    EXPECT_EQ(tok->encode(c.text, false), c.ids) << family() << " line " << c.line << ": " << c.text;
    EXPECT_EQ(tok->encode(c.text, true), c.ids_with_special) << family() << " line " << c.line << ": " << c.text;
  }
}

TEST_P(GoldenCases, DecodeMatchesText) {
  const Tokenizer* tok = reference_tokenizer(family());
  ASSERT_NE(tok, nullptr);
  for (const GoldenCase& c : cases()) {
    EXPECT_EQ(tok->decode(c.ids), c.decoded) << family() << " line " << c.line;
    EXPECT_EQ(tok->decode(c.ids_with_special), tok->decode(c.ids_with_special, false)) << "default keeps specials";
  }
}

TEST_P(GoldenCases, SkipSpecialDropsOnlySpecialTokens) {
  const Tokenizer* tok = reference_tokenizer(family());
  ASSERT_NE(tok, nullptr);
  for (const GoldenCase& c : cases()) {
    std::vector<int32_t> plain;
    for (const int32_t id : c.ids) {
      if (!tok->is_special(id)) plain.push_back(id);
    }
    EXPECT_EQ(tok->decode(c.ids, /*skip_special=*/true), tok->decode(plain)) << family() << " line " << c.line;
  }
}

TEST_P(GoldenCases, StreamingDecodeEqualsFullDecode) {
  const Tokenizer* tok = reference_tokenizer(family());
  ASSERT_NE(tok, nullptr);
  for (const bool skip_special : {false, true}) {
    for (const GoldenCase& c : cases()) {
      StreamDecoder stream(*tok, skip_special);
      std::string text;
      for (const int32_t id : c.ids_with_special) {
        const std::string chunk = stream.feed(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << family() << " line " << c.line << " after id " << id;
        text += chunk;
      }
      text += stream.finish();
      EXPECT_EQ(text, tok->decode(c.ids_with_special, skip_special)) << family() << " line " << c.line;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, GoldenCases,
                         ::testing::Combine(::testing::Values("golden", "differential"),
                                            ::testing::Values("qwen3", "llama3")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace mi::tok::testing
