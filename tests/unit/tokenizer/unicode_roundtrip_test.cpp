// Properties of the reference tokenizers over texts no golden file covers: random strings drawn from all of
// Unicode (every plane, combining marks, emoji, CJK, digits of many scripts, all whitespace kinds, controls).
// decode(encode(x)) must give x back (after the tokenizer's own normalization and decode cleanup), every id
// must be valid, and the streaming decoder must agree with the full decode while only ever returning valid UTF-8.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/cleanup_spaces.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace mi::tok::testing {
namespace {

std::string random_text(std::mt19937& rng) {
  // Ranges chosen to hit every kind of code point the pre-tokenizer regexes distinguish.
  static const std::vector<std::pair<char32_t, char32_t>> kRanges = {
      {0x20, 0x7E},       {0x09, 0x0D},       {0x80, 0xFF},       {0x100, 0x24F},     {0x300, 0x36F},
      {0x370, 0x3FF},     {0x400, 0x4FF},     {0x590, 0x5FF},     {0x600, 0x6FF},     {0x900, 0x97F},
      {0xE00, 0xE7F},     {0x1100, 0x11FF},   {0x2000, 0x206F},   {0x2070, 0x209F},   {0x2150, 0x218F},
      {0x2460, 0x24FF},   {0x3000, 0x303F},   {0x3040, 0x30FF},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
      {0xE000, 0xE0FF},   {0xFE00, 0xFE0F},   {0xFEFF, 0xFEFF},   {0xFF00, 0xFFEF},   {0x1D400, 0x1D7FF},
      {0x1F300, 0x1FAFF}, {0x1F1E6, 0x1F1FF}, {0x20000, 0x2A6DF}, {0xE0000, 0xE007F}, {0x10FFF0, 0x10FFFF},
      {0x0378, 0x0379},  // unassigned
  };
  std::uniform_int_distribution<size_t> length(0, 40), range(0, kRanges.size() - 1);
  std::string s;
  const size_t n = length(rng);
  for (size_t i = 0; i < n; ++i) {
    const auto [lo, hi] = kRanges[range(rng)];
    append_utf8(s, std::uniform_int_distribution<uint32_t>(lo, hi)(rng));
  }
  return s;
}

class UnicodeRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(UnicodeRoundTrip, RandomTextsRoundTripAndStream) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  // What decode(encode(x)) should be: x under the tokenizer's normalizer, then its decode-time cleanup.
  const nlohmann::json tokenizer_json = nlohmann::json::parse(std::ifstream(tokenizer_dir(GetParam()) / "tokenizer.json"));
  const Normalizer normalizer = Normalizer::from_json(tokenizer_json["normalizer"], "tokenizer.json");
  std::mt19937 rng(20240611);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_text(rng);
    const std::vector<int32_t> ids = tok->encode(text);
    for (const int32_t id : ids) ASSERT_TRUE(tok->is_valid_id(id)) << id;
    std::string expected = normalizer.apply(text);
    if (tok->cleans_up_tokenization_spaces()) expected = clean_up_tokenization_spaces(expected);
    const std::string decoded = tok->decode(ids);
    ASSERT_EQ(decoded, expected) << "case " << i;
    StreamDecoder stream(*tok);
    std::string streamed;
    for (const int32_t id : ids) {
      const std::string chunk = stream.feed(id);
      ASSERT_TRUE(is_valid_utf8(chunk)) << "case " << i;
      streamed += chunk;
    }
    streamed += stream.finish();
    ASSERT_EQ(streamed, decoded) << "case " << i;
  }
}

TEST_P(UnicodeRoundTrip, StreamingNeverSplitsACharacterAcrossChunks) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  // Multi-byte characters that byte-level BPE splits over several tokens.
  const std::string text = "𠀀𪜀 👨‍👩‍👧‍👦 🇫🇷 ꙮ 𝔘𝔫𝔦 \xF3\xA0\x80\x81 각";
  const std::vector<int32_t> ids = tok->encode(text);
  ASSERT_GT(ids.size(), 10u);
  StreamDecoder stream(*tok);
  std::string streamed;
  size_t held_at_least_once = 0;
  for (const int32_t id : ids) {
    const std::string chunk = stream.feed(id);
    EXPECT_TRUE(is_valid_utf8(chunk));
    if (chunk.empty()) ++held_at_least_once;
    streamed += chunk;
  }
  streamed += stream.finish();
  EXPECT_GT(held_at_least_once, 0u) << "expected some tokens to end mid-character";
  EXPECT_EQ(streamed, tok->decode(ids));
}

TEST_P(UnicodeRoundTrip, InvalidByteSequencesDecodeToReplacementCharacters) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  // Byte-level tokens "ð" (byte 0xF0, the lead of a 4-byte character), "A", "ð": both leads are cut short.
  const auto lead = tok->token_to_id("ð");
  const auto a = tok->token_to_id("A");
  ASSERT_TRUE(lead && a);
  const std::string expected = "\xEF\xBF\xBD" "A" "\xEF\xBF\xBD";
  EXPECT_EQ(tok->decode({*lead, *a, *lead}), expected);
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.feed(*lead), "");  // could still become a character
  std::string streamed = stream.feed(*a);
  EXPECT_EQ(streamed.substr(0, 3), "\xEF\xBF\xBD");  // now it cannot
  streamed += stream.feed(*lead);
  streamed += stream.finish();
  EXPECT_EQ(streamed, expected);
}

TEST_P(UnicodeRoundTrip, StreamingEqualsFullDecodeForArbitraryIdSequences) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  // Random ids: partial characters, invalid byte orders, special tokens, and (Llama 3) the space cleanup with
  // its look-ahead all meet here. Short tokens ("Ġ", ".", "'", "n", byte tokens) are drawn often on purpose.
  std::vector<int32_t> short_ids;
  for (int32_t id = 0; id < static_cast<int32_t>(tok->vocab_size()); ++id) {
    if (tok->is_valid_id(id) && tok->id_to_token(id).size() <= 3) short_ids.push_back(id);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(tok->vocab_size()) - 1);
  std::uniform_int_distribution<size_t> any_short(0, short_ids.size() - 1), length(0, 30);
  for (int i = 0; i < 2000; ++i) {
    std::vector<int32_t> ids;
    const size_t n = length(rng);
    for (size_t k = 0; k < n; ++k) {
      const int32_t id = rng() % 3 == 0 ? any_id(rng) : short_ids[any_short(rng)];
      if (tok->is_valid_id(id)) ids.push_back(id);
    }
    for (const bool skip_special : {false, true}) {
      StreamDecoder stream(*tok, skip_special);
      std::string streamed;
      for (const int32_t id : ids) {
        const std::string chunk = stream.feed(id);
        ASSERT_TRUE(is_valid_utf8(chunk)) << "case " << i;
        streamed += chunk;
      }
      streamed += stream.finish();
      ASSERT_EQ(streamed, tok->decode(ids, skip_special)) << "case " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, UnicodeRoundTrip, ::testing::Values("qwen3", "llama3"));

}  // namespace
}  // namespace mi::tok::testing
