// Encoding speed on ~1 MB of mixed text (English prose, code, CJK, emoji, numbers), reported as tokens/s; the
// test also checks the 1 MB round trip, and that the result equals encoding the text piece by piece (the word
// cache must not change results).
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include "tokenizer/cleanup_spaces.h"
#include "tokenizer_test_util.h"

namespace mi::tok::testing {
namespace {

// ~1 MB built from varied paragraphs; the counter makes numbers (and so some words) differ between repetitions.
std::string megabyte_of_text() {
  const char* paragraphs[] = {
      "The quick brown fox jumps over the lazy dog while the committee debates whether it's reasonable to "
      "schedule the review for Thursday; nobody's sure, but they'll decide soon.\n",
      "def fibonacci(n: int) -> int:\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n",
      "for (size_t i = 0; i < v.size(); ++i) { total += v[i] * weights[i]; }  // dot product\n",
      "机器学习是人工智能的一个分支，它使计算机能够在没有明确编程的情况下从数据中学习。今天天气很好。\n",
      "日本語のテキストとカタカナ、ひらがな。한국어 문장입니다. Ελληνικά και русский текст.\n",
      "Emoji 😀🚀👍🏽 and symbols ∑ √ ≤ — “quotes” … prices: $1,299.99, €45, 3.14159, 2026-11-29.\n",
      "{\"id\": 12345, \"name\": \"metainfer\", \"tags\": [\"llm\", \"c++\"], \"ok\": true}\n",
  };
  std::string text;
  text.reserve(1 << 20);
  for (int i = 0; text.size() < (1 << 20); ++i) {
    text += paragraphs[i % 7];
    if (i % 5 == 0) text += "Item " + std::to_string(i * 7919) + ":\t";
  }
  return text;
}

class Throughput : public ::testing::TestWithParam<std::string> {};

TEST_P(Throughput, EncodeOneMegabyte) {
  const Tokenizer* tok = reference_tokenizer(GetParam());
  ASSERT_NE(tok, nullptr);
  const std::string text = megabyte_of_text();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens_per_s = ids.size() / seconds;
  std::printf("[ throughput ] %s: %zu bytes -> %zu tokens in %.3f s = %.0f tokens/s (%.2f MB/s)\n",
              GetParam().c_str(), text.size(), ids.size(), seconds, tokens_per_s, text.size() / seconds / 1e6);
  RecordProperty("tokens_per_second", static_cast<int>(tokens_per_s));

  const auto dstart = std::chrono::steady_clock::now();
  const std::string decoded = tok->decode(ids);
  const double dseconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - dstart).count();
  std::printf("[ throughput ] %s: decode %.0f tokens/s\n", GetParam().c_str(), ids.size() / dseconds);
  EXPECT_EQ(decoded, tok->cleans_up_tokenization_spaces() ? clean_up_tokenization_spaces(text) : text);

  // Line by line (each line ends with \n or \t... so pre-token boundaries are the same) gives the same ids.
  std::vector<int32_t> piecewise;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    // Split only where the next line starts with a letter (a "\n" + "\n" boundary would merge in one piece).
    while (end < text.size() && (text[end] == '\n' || text[end] == ' ')) {
      end = text.find('\n', end);
      end = end == std::string::npos ? text.size() : end + 1;
    }
    const auto part = tok->encode(std::string_view(text).substr(pos, end - pos));
    piecewise.insert(piecewise.end(), part.begin(), part.end());
    pos = end;
  }
  EXPECT_EQ(piecewise, ids);
}

INSTANTIATE_TEST_SUITE_P(Reference, Throughput, ::testing::Values("qwen3", "llama3"));

}  // namespace
}  // namespace mi::tok::testing
