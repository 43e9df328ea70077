// Small hand-made tokenizer.json files, to pin down each pipeline stage on its own: BPE merge order, both merge
// formats, ignore_merges, byte_fallback, unk, added-token flags, post-processors, decoders, and the load errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mi::tok {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A tokenizer over the letters a..e with no pre-tokenizer (the whole text is one word) and no decoder.
json base_tokenizer(json merges) {
  return json{{"version", "1.0"},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"added_tokens", json::array()},
              {"model",
               {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}, {"e", 4}, {"ab", 5}, {"bc", 6}, {"abc", 7},
                           {"aa", 8}, {"cd", 9}, {"abcd", 10}, {" ", 11}}},
                {"merges", std::move(merges)}}}};
}

Tokenizer make(const json& j, const json& config = nullptr) { return Tokenizer::from_json(j, config, "test.json"); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mi::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Bpe, LowestRankMergesFirst) {
  EXPECT_EQ(make(base_tokenizer({"b c", "a bc"})).encode("abc"), Ids({7}));
  EXPECT_EQ(make(base_tokenizer({"a b", "ab c"})).encode("abc"), Ids({7}));
  // b c ranks first, so "ab" never forms and "a bc" is not a merge: a + bc.
  EXPECT_EQ(make(base_tokenizer({"b c", "a b", "ab c"})).encode("abc"), Ids({0, 6}));
  EXPECT_EQ(make(base_tokenizer({"a b", "c d", "ab cd"})).encode("abcdab"), Ids({10, 5}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  EXPECT_EQ(make(base_tokenizer({"a a"})).encode("aaa"), Ids({8, 0}));
  EXPECT_EQ(make(base_tokenizer({"a a"})).encode("aaaa"), Ids({8, 8}));
}

TEST(Bpe, PairFormMergesEqualStringForm) {
  const Tokenizer pairs = make(base_tokenizer(json::array({json::array({"b", "c"}), json::array({"a", "bc"})})));
  EXPECT_EQ(pairs.encode("abcabc"), Ids({7, 7}));
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json j = base_tokenizer({"a b"});  // merges alone give ab + c
  EXPECT_EQ(make(j).encode("abc"), Ids({5, 2}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(j).encode("abc"), Ids({7}));
  EXPECT_EQ(make(j).encode("abcb"), Ids({5, 2, 1}));  // not in the vocabulary: merges as usual
}

TEST(Bpe, UnknownCharactersUseByteFallbackThenUnk) {
  json j = base_tokenizer(json::array());
  j["model"]["vocab"]["<0xC3>"] = 20;
  j["model"]["vocab"]["<0xA9>"] = 21;
  j["model"]["vocab"]["<unk>"] = 22;
  j["model"]["byte_fallback"] = true;
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(make(j).encode("a\xC3\xA9" "b"), Ids({0, 20, 21, 1}));  // é = C3 A9
  EXPECT_EQ(make(j).encode("xy"), Ids({22, 22}));                     // no <0x78>: unk per character
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(make(j).encode("xya"), Ids({22, 0}));
  j["model"]["unk_token"] = nullptr;
  EXPECT_EQ(make(j).encode("xya"), Ids({0}));  // neither: unknown characters produce nothing (as HF)
}

TEST(Bpe, ByteFallbackDecoderRestoresBytes) {
  json j = base_tokenizer(json::array());
  j["model"]["vocab"]["<0xC3>"] = 20;
  j["model"]["vocab"]["<0xA9>"] = 21;
  j["model"]["byte_fallback"] = true;
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.decode({0, 20, 21, 1}), "a\xC3\xA9" "b");
  EXPECT_EQ(t.decode({0, 20, 1}), "a\xEF\xBF\xBD" "b");  // lone lead byte -> U+FFFD
  StreamDecoder s(t);
  EXPECT_EQ(s.feed(0), "a");
  EXPECT_EQ(s.feed(20), "");  // half a character: held
  EXPECT_EQ(s.feed(21), "\xC3\xA9");
  EXPECT_EQ(s.finish(), "");
}

TEST(Decoder, NullDecoderJoinsWithSpaces) {
  const Tokenizer t = make(base_tokenizer({"a b"}));
  EXPECT_EQ(t.decode({5, 2}), "ab c");
  StreamDecoder s(t);
  std::string streamed = s.feed(5);
  streamed += s.feed(2);
  streamed += s.finish();
  EXPECT_EQ(streamed, "ab c");
}

TEST(AddedTokens, LongestMatchWinsAndSplitsBeforeTheModel) {
  json j = base_tokenizer({"a b"});
  j["added_tokens"] = {{{"id", 30}, {"content", "<x>"}, {"special", true}, {"normalized", false}},
                       {{"id", 31}, {"content", "<x>>"}, {"special", false}, {"normalized", false}}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("ab<x>ab"), Ids({5, 30, 5}));
  EXPECT_EQ(t.encode("<x>><x>"), Ids({31, 30}));
  EXPECT_EQ(t.decode({5, 30, 5}, /*skip_special=*/true), "ab ab");
  EXPECT_EQ(t.decode({31}, /*skip_special=*/true), "<x>>");  // non-special added tokens stay
  EXPECT_EQ(t.token_to_id("<x>"), 30);
  EXPECT_EQ(t.id_to_token(31), "<x>>");
  EXPECT_EQ(t.vocab_size(), 32u);
}

TEST(AddedTokens, StripAndSingleWordFlags) {
  json j = base_tokenizer(json::array());
  j["added_tokens"] = {{{"id", 30}, {"content", "<m>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
                       {{"id", 31}, {"content", "cd"}, {"special", false}, {"normalized", false}, {"single_word", true}}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("a  <m> b"), Ids({0, 30, 1}));  // the spaces on both sides are part of the match
  EXPECT_EQ(t.encode("a cd b"), Ids({0, 11, 31, 11, 1}));
  EXPECT_EQ(t.encode("acd"), Ids({0, 2, 3}));  // inside a word: not the added token
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  json j = base_tokenizer(json::array());
  j["normalizer"] = {{"type", "Lowercase"}};
  j["added_tokens"] = {{{"id", 30}, {"content", "<AB>"}, {"special", false}, {"normalized", true}}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("A<ab>B"), Ids({0, 30, 1}));
  EXPECT_EQ(t.encode("<AB>"), Ids({30}));
}

TEST(PostProcessor, TemplateProcessingAddsBos) {
  json j = base_tokenizer(json::array());
  j["added_tokens"] = {{{"id", 40}, {"content", "<s>"}, {"special", true}}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {40}}, {"tokens", {"<s>"}}}}}}};
  const Tokenizer t = make(j, json{{"bos_token", "<s>"}});
  EXPECT_EQ(t.encode("ab", true), Ids({40, 0, 1}));
  EXPECT_EQ(t.encode("ab", false), Ids({0, 1}));
  EXPECT_EQ(t.bos_id(), 40);
  EXPECT_EQ(t.eos_id(), std::nullopt);
  // Wrapped in a Sequence with a ByteLevel processor (which adds nothing).
  j["post_processor"] = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, j["post_processor"]}}};
  EXPECT_EQ(make(j).encode("ab", true), Ids({40, 0, 1}));
}

TEST(PostProcessor, BertStyleWrapsClsAndSep) {
  json j = base_tokenizer(json::array());
  j["added_tokens"] = {{{"id", 41}, {"content", "[CLS]"}, {"special", true}},
                       {{"id", 42}, {"content", "[SEP]"}, {"special", true}}};
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"[CLS]", 41}}, {"sep", {"[SEP]", 42}}};
  EXPECT_EQ(make(j).encode("a", true), Ids({41, 0, 42}));
}

TEST(PreTokenizer, SplitBehaviors) {
  // Split on "-" with each behavior, over a vocabulary where every piece is one token.
  auto encode_with = [](const std::string& behavior, bool invert) {
    json j = base_tokenizer(json::array());
    j["model"]["vocab"] = {{"a", 0}, {"-", 1}, {"a-", 2}, {"-a", 3}, {"--", 4}, {"a--", 5}, {"--a", 6}};
    j["model"]["ignore_merges"] = true;  // each piece is looked up whole
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    return make(j).encode("a--a-a");
  };
  EXPECT_EQ(encode_with("Isolated", false), Ids({0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(encode_with("Removed", false), Ids({0, 0, 0}));
  EXPECT_EQ(encode_with("Contiguous", false), Ids({0, 4, 0, 1, 0}));
  EXPECT_EQ(encode_with("MergedWithPrevious", false), Ids({2, 1, 2, 0}));
  EXPECT_EQ(encode_with("MergedWithNext", false), Ids({0, 1, 3, 3}));
  EXPECT_EQ(encode_with("Removed", true), Ids({1, 1, 1}));  // inverted: the letters are the delimiters
}

TEST(PreTokenizer, ByteLevelWithGpt2RegexAndPrefixSpace) {
  // GPT-2 style: ByteLevel(add_prefix_space, use_regex) alone. " world" -> "Ġworld" pieces.
  json j = base_tokenizer(json::array());
  j["model"]["vocab"] = {{"Ġhi", 0}, {"Ġthere", 1}, {"'s", 2}, {"Ġ", 3}, {"!", 4}};
  j["model"]["ignore_merges"] = true;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("hi there's!"), Ids({0, 1, 2, 4}));
  EXPECT_EQ(t.decode({0, 1, 2, 4}), " hi there's!");
}

TEST(LoadErrors, UnsupportedComponentsAreNamed) {
  json j = base_tokenizer(json::array());
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of([&] { make(j); }).find("model type 'WordPiece' is not supported"), std::string::npos);
  j = base_tokenizer(json::array());
  j["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_NE(error_of([&] { make(j); }).find("normalizer type 'BertNormalizer'"), std::string::npos);
  j = base_tokenizer(json::array());
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}};
  EXPECT_NE(error_of([&] { make(j); }).find("normalizer type 'Strip'"), std::string::npos);
  j = base_tokenizer(json::array());
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_NE(error_of([&] { make(j); }).find("pre_tokenizer type 'Metaspace'"), std::string::npos);
  j = base_tokenizer(json::array());
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(?<=a)b"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of([&] { make(j); }).find("lookbehind"), std::string::npos);
  j = base_tokenizer(json::array());
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of([&] { make(j); }).find("decoder type 'WordPiece'"), std::string::npos);
  j = base_tokenizer(json::array());
  j["post_processor"] = {{"type", "Bogus"}};
  EXPECT_NE(error_of([&] { make(j); }).find("post_processor type 'Bogus'"), std::string::npos);
}

TEST(LoadErrors, InconsistentModelsAreRejected) {
  EXPECT_NE(error_of([&] { make(base_tokenizer({"a x"})); }).find("\"x\" is not in the vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { make(base_tokenizer({"c e"})); }).find("\"ce\" is not in the vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { make(base_tokenizer({"abc"})); }).find("merges[0]"), std::string::npos);
  json j = base_tokenizer(json::array());
  j.erase("model");
  EXPECT_NE(error_of([&] { make(j); }).find("'model'"), std::string::npos);
  j = base_tokenizer(json::array());
  j["model"]["vocab"]["z"] = -3;
  EXPECT_NE(error_of([&] { make(j); }).find("vocab entry \"z\""), std::string::npos);
  j = base_tokenizer(json::array());
  EXPECT_NE(error_of([&] { make(j, json{{"bos_token", "<nope>"}}); }).find("<nope>"), std::string::npos);
}

class LoadFromDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mi_tok_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& content) { std::ofstream(dir_ / name) << content; }
  std::filesystem::path dir_;
};

TEST_F(LoadFromDisk, MissingFileIsNamed) {
  const std::string e = error_of([&] { Tokenizer::load(dir_ / "absent"); });
  EXPECT_NE(e.find("absent/tokenizer.json"), std::string::npos) << e;
}

TEST_F(LoadFromDisk, MalformedJsonIsNamed) {
  write("tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  const std::string e = error_of([&] { Tokenizer::load(dir_); });
  EXPECT_NE(e.find("tokenizer.json: not valid JSON"), std::string::npos) << e;
}

TEST_F(LoadFromDisk, ConfigIsOptionalAndReadWhenPresent) {
  json j = base_tokenizer(json::array());
  j["added_tokens"] = {{{"id", 40}, {"content", "<s>"}, {"special", true}}};
  write("tokenizer.json", j.dump());
  EXPECT_EQ(Tokenizer::load(dir_).bos_id(), std::nullopt);
  write("tokenizer_config.json", json{{"bos_token", {{"content", "<s>"}}}, {"eos_token", "<s>"}}.dump());
  EXPECT_EQ(Tokenizer::load(dir_).bos_id(), 40);
  EXPECT_EQ(Tokenizer::load(dir_).eos_id(), 40);
}

TEST(Encode, InvalidUtf8InputIsAnError) {
  const Tokenizer t = make(base_tokenizer(json::array()));
  EXPECT_NE(error_of([&] { t.encode("ab\xFF"); }).find("not valid UTF-8 at byte 2"), std::string::npos);
}

TEST(Decode, UnknownIdsAreNamed) {
  const Tokenizer t = make(base_tokenizer(json::array()));
  EXPECT_NE(error_of([&] { t.decode({0, 99}); }).find("token id 99"), std::string::npos);
  EXPECT_NE(error_of([&] { t.decode({-1}); }).find("token id -1"), std::string::npos);
  StreamDecoder s(t);
  EXPECT_THROW(s.feed(12345), mi::Error);
}

}  // namespace
}  // namespace mi::tok
