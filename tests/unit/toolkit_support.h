// Helpers shared by the toolkit test areas: run the real `metainfer` binary, temporary directories.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "process/subprocess.h"

namespace mi_test {

inline std::filesystem::path golden(const std::string& name) {
  return std::filesystem::path(METAINFER_TEST_DATA) / "golden" / name;
}

// Runs `metainfer args...`.
inline mi::process::RunResult metainfer(const std::vector<std::string>& args, double timeout_s = 900) {
  std::vector<std::string> argv = {METAINFER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return mi::process::run(argv, {.timeout_s = timeout_s});
}

// The last non-empty line of `out` parsed as JSON.
using mi::process::last_json_line;

// A fresh empty directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("metainfer-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

// Writes `to_file`: the weights of checkpoint `from` without tensor `missing`.
inline void write_weights_without(const std::filesystem::path& from, const std::filesystem::path& to_file,
                                  const std::string& missing) {
  const auto store = mi::io::WeightStore::open(from);
  std::vector<mi::io::TensorToWrite> tensors;
  for (const auto& n : store.names()) {
    if (n == missing) continue;
    const auto& t = store.get(n);
    tensors.push_back({n, t.dtype, t.shape, t.data, t.nbytes});
  }
  std::filesystem::create_directories(to_file.parent_path());
  mi::io::write_safetensors(to_file, tensors);
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace mi_test
