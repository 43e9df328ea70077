#include "generator/manifest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace mi::generator {
namespace fs = std::filesystem;

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr)) fail("sha256: OpenSSL EVP_Digest failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), ": cannot read");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string sha256_file(const fs::path& file) { return sha256_hex(read_file(file)); }

void write_file(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail(file.string(), ": cannot write");
  out << bytes;
  out.close();  // a full disk shows only when the buffer is flushed
  if (!out) fail(file.string(), ": write failed (disk full?)");
}

int count_lines(const std::string& text) {
  int n = int(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

std::vector<std::string> engine_source_files(const fs::path& engine_dir) {
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(engine_dir); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), engine_dir);
    const std::string top = rel.begin()->string();
    if (it->is_directory() && (top == "build" || top == "reports")) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() && !it->is_symlink()) continue;
    if (rel == "MANIFEST.json") continue;
    files.push_back(rel.generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace mi::generator
