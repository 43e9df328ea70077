// Replays the safetensors header fuzz corpus (tests/data/fuzz/safetensors_header/) through the parser: every input
// must either parse or be rejected with mi::Error. Valid inputs must yield views inside the buffer.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace mi::io {
namespace {

TEST(SafetensorsFuzzCorpus, EveryInputParsesOrFailsCleanly) {
  const std::filesystem::path corpus = std::filesystem::path(METAINFER_TEST_DATA) / "fuzz" / "safetensors_header";
  ASSERT_TRUE(std::filesystem::is_directory(corpus)) << corpus;
  int files = 0, accepted = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    const std::string bytes = test::read_bytes(entry.path());
    std::vector<std::byte> buffer(bytes.size());  // exactly sized, as the fuzzer gives it
    for (std::size_t i = 0; i < bytes.size(); ++i) buffer[i] = std::byte(static_cast<unsigned char>(bytes[i]));
    try {
      std::vector<TensorView> tensors = parse_safetensors_header(buffer.data(), buffer.size(), entry.path().string());
      ++accepted;
      for (const TensorView& view : tensors) {
        EXPECT_GE(view.data, buffer.data() + 8) << entry.path() << " " << view.name;
        EXPECT_LE(view.data + view.nbytes, buffer.data() + buffer.size()) << entry.path() << " " << view.name;
      }
    } catch (const mi::Error& e) {
      EXPECT_NE(std::string(e.what()).find(entry.path().string()), std::string::npos) << "error names the source";
    }
  }
  EXPECT_GE(files, 10) << "corpus missing";
  EXPECT_GE(accepted, 1) << "corpus has no valid file";
}

}  // namespace
}  // namespace mi::io
