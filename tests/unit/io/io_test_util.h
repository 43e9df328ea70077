// Helpers for the io tests: scratch directories and hand-made (possibly corrupt) safetensors files.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"

namespace mi::io::test {

// A fresh directory under the system temp dir, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("mi_io_") + (info ? info->name() : "test") + "_" + std::to_string(rd());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file image: 8-byte LE length (declared_length, or the header's real length), header text, data.
inline std::string safetensors_image(const std::string& header, const std::string& data,
                                     std::optional<uint64_t> declared_length = std::nullopt) {
  uint64_t length = declared_length.value_or(header.size());
  std::string image;
  for (int i = 0; i < 8; ++i) image.push_back(char((length >> (8 * i)) & 0xff));
  return image + header + data;
}

// Runs `action` and returns the mi::Error message; fails the test when nothing (or another exception) is thrown.
template <class Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const mi::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected mi::Error, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected mi::Error, nothing was thrown";
  return {};
}

}  // namespace mi::io::test

// Expects the error message `message` (evaluated once) to contain `fragment`.
#define EXPECT_ERROR_HAS(message, fragment)                                              \
  do {                                                                                   \
    const std::string error_message_ = (message);                                       \
    EXPECT_NE(error_message_.find(fragment), std::string::npos) << "message: " << error_message_; \
  } while (0)
