// The pre-tokenizer regex engine: the constructs of the Qwen2/3, Llama 3 and GPT-2 split patterns, Perl-style
// leftmost-first alternation, backtracking, and clear errors for what it does not support.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace mi::tok {
namespace {

// The pieces find_all cuts out of `text` (UTF-8 in, UTF-8 out).
std::vector<std::string> matches(const std::string& pattern, const std::string& text) {
  std::vector<size_t> offsets;
  const std::u32string cps = decode_utf8_strict(text, "test", &offsets);
  std::vector<std::string> out;
  for (const auto& [b, e] : Regex(pattern).find_all(cps)) out.push_back(text.substr(offsets[b], offsets[e] - offsets[b]));
  return out;
}

using Pieces = std::vector<std::string>;

constexpr const char* kQwen =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(Regex, AlternativesAreTriedInOrderNotLongestFirst) {
  EXPECT_EQ(matches("a|ab", "ab"), Pieces({"a"}));
  EXPECT_EQ(matches("ab|a", "ab"), Pieces({"ab"}));
}

TEST(Regex, GreedyQuantifiersBacktrackIntoLookahead) {
  // \s+(?!\S) leaves the last space for the word after it.
  EXPECT_EQ(matches(R"(\s+(?!\S))", "a    b"), Pieces({"   "}));
  EXPECT_EQ(matches(R"(\s+(?!\S))", "a    "), Pieces({"    "}));
  EXPECT_EQ(matches(R"(x(?=y))", "xyxz"), Pieces({"x"}));
}

TEST(Regex, CountedRepetition) {
  EXPECT_EQ(matches(R"(\p{N}{1,3})", "1234567"), Pieces({"123", "456", "7"}));
  EXPECT_EQ(matches(R"(a{2})", "aaaaa"), Pieces({"aa", "aa"}));
  EXPECT_EQ(matches(R"(a{2,})", "a aaaa"), Pieces({"aaaa"}));
  EXPECT_EQ(matches(R"(a+?)", "aaa"), Pieces({"a", "a", "a"}));
  EXPECT_EQ(matches(R"((?:ab)+)", "abababx"), Pieces({"ababab"}));
}

TEST(Regex, UnicodeCategoriesOfManyScripts) {
  // Arabic-Indic, Devanagari, fullwidth digits and superscripts are all \p{N}; Llama 3 groups them by three.
  EXPECT_EQ(matches(kLlama3, "١٢٣٤ ०१२ １２３４ x²³"), Pieces({"١٢٣", "٤", " ", "०१२", " ", "１２３", "４", " x", "²³"}));
  EXPECT_EQ(matches(kQwen, "٤٥"), Pieces({"٤", "٥"}));
  // Letters of any script, with a leading non-letter/non-number attached.
  EXPECT_EQ(matches(kQwen, "Привет, мир"), Pieces({"Привет", ",", " мир"}));
  EXPECT_EQ(matches(R"(\p{Lu}+|\p{Ll}+)", "ABcdÉé"), Pieces({"AB", "cd", "É", "é"}));
  EXPECT_EQ(matches(R"(\P{L}+)", "ab12cd!?"), Pieces({"12", "!?"}));
}

TEST(Regex, CombiningMarksAreNotLetters) {
  // e + U+0301: the mark is \p{M}, so it ends the \p{L}+ run and starts a punctuation-like piece.
  EXPECT_EQ(matches(kQwen, "cafe\xCC\x81s"), Pieces({"cafe", "\xCC\x81s"}));
}

TEST(Regex, CaseInsensitiveContractions) {
  EXPECT_EQ(matches(kQwen, "DON'T I'M we'Re"), Pieces({"DON", "'T", " I", "'M", " we", "'Re"}));
  EXPECT_EQ(matches(R"((?i:ll))", "LL lL Ll"), Pieces({"LL", "lL", "Ll"}));
  EXPECT_EQ(matches(R"(ll)", "LL ll"), Pieces({"ll"}));  // outside (?i:...) case matters
}

TEST(Regex, WhitespaceIsUnicodeWhiteSpace) {
  // \s is the White_Space property: NBSP, ideographic space, NEL are whitespace; U+FEFF and U+200B are not.
  EXPECT_EQ(matches(R"(\s+)", "a\xC2\xA0\xE3\x80\x80\xC2\x85" "b"), Pieces({"\xC2\xA0\xE3\x80\x80\xC2\x85"}));
  EXPECT_EQ(matches(R"(\s+)", "a\xEF\xBB\xBF\xE2\x80\x8B" "b"), Pieces({}));
  EXPECT_EQ(matches(R"(\S+)", "x\xEF\xBB\xBFy z"), Pieces({"x\xEF\xBB\xBFy", "z"}));
}

TEST(Regex, NewlinesAndCarriageReturns) {
  EXPECT_EQ(matches(kQwen, "a\r\n\r\nb"), Pieces({"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(matches(kQwen, "x  \n  y"), Pieces({"x", "  \n", " ", " y"}));
  EXPECT_EQ(matches(kQwen, "end.\n\n"), Pieces({"end", ".\n\n"}));
}

TEST(Regex, ClassesRangesAndEscapes) {
  EXPECT_EQ(matches(R"([a-c\d]+)", "abc123def"), Pieces({"abc123"}));
  EXPECT_EQ(matches(R"([^a-c]+)", "abcxyzabc"), Pieces({"xyz"}));
  EXPECT_EQ(matches(R"(\x41\u0042\x{43})", "ABC"), Pieces({"ABC"}));
  EXPECT_EQ(matches(R"(\.\*\[)", "a.*[b"), Pieces({".*["}));
  EXPECT_EQ(matches(R"([]a]+)", "]a]b"), Pieces({"]a]"}));
  EXPECT_EQ(matches(R"(^a|b$)", "aab"), Pieces({"a", "b"}));
  EXPECT_EQ(matches(R"(a.c)", "abc a\nc"), Pieces({"abc"}));
}

TEST(Regex, EmptyMatchesAreSkipped) {
  EXPECT_EQ(matches(R"(a*)", "baab"), Pieces({"aa"}));
}

TEST(Regex, UnsupportedSyntaxIsRejectedWithThePattern) {
  for (const char* bad : {R"((?<=a)b)", R"((?<!a)b)", R"((a)\1)", R"(\p{Han}+)", R"((?>a))", R"([[a]])", R"((a)",
                          R"(a))", R"([a)", R"(a{3,2})", R"(*a)", R"(a**)", R"(\bword)", R"((?P<n>a))", R"(\q)"}) {
    try {
      Regex r(bad);
      ADD_FAILURE() << "accepted unsupported pattern " << bad;
    } catch (const mi::Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(Regex, PathologicalInputFailsCleanlyInsteadOfHangingOrCrashing) {
  // Nested quantifiers backtrack exponentially; the engine bounds the work and reports it.
  const std::u32string as(40, U'a');
  bool threw = false;
  try {
    size_t b = 0, e = 0;
    Regex(R"((a*)*b)").find(as, 0, &b, &e);
  } catch (const mi::Error&) {
    threw = true;
  }
  EXPECT_TRUE(threw);
  // A repeated group with choices inside recurses per iteration: on a very long input that is bounded too.
  std::u32string abs;
  for (int i = 0; i < 100000; ++i) abs += U"ab";
  EXPECT_THROW(Regex(R"((?:a|b)+)").find_all(abs), mi::Error);
  // Fixed-width groups (ab, \p{N}{3}) repeat without recursion: one match over the whole run.
  EXPECT_EQ(Regex(R"((?:ab)+)").find_all(abs), (std::vector<std::pair<size_t, size_t>>{{0, abs.size()}}));
  const std::u32string digits(30001, U'7');
  EXPECT_EQ(Regex(R"((?:\p{Nd}{3})+)").find_all(digits), (std::vector<std::pair<size_t, size_t>>{{0, 30000}}));
  // Single-character repeats need no recursion per character: a 1M-letter run is one match.
  const std::u32string letters(1'000'000, U'x');
  const auto m = Regex(kQwen).find_all(letters);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].second, letters.size());
}

}  // namespace
}  // namespace mi::tok
