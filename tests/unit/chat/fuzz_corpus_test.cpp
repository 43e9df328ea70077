// Replays the minimized libFuzzer corpus of the chat-template fuzzer (tests/data/fuzz/chat_template/) through the
// fuzz target itself: every input must end in a rendered prompt or an mi::Error (the target catches those), with
// no crash and in bounded time. Under the sanitizer build this is the fuzzer's regression suite.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../../fuzz/chat_template.cpp"  // LLVMFuzzerTestOneInput

namespace {

TEST(ChatTemplateFuzzCorpus, EveryInputEndsCleanly) {
  const std::filesystem::path dir = std::filesystem::path(METAINFER_TEST_DATA) / "fuzz" / "chat_template";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " missing";
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string input = buffer.str();
    SCOPED_TRACE(entry.path().filename().string());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size()), 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "slow input";
    ++count;
  }
  EXPECT_GT(count, 50u);
  EXPECT_LE(count, 200u);
}

}  // namespace
