#include "agents/signature_files.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include <sys/stat.h>

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunk = std::size_t(4) << 20;
// Kept from the end of one chunk in front of the next: longer than any marker, and enough of the line before a
// line-start marker to see that only indentation precedes it.
constexpr std::size_t kCarry = 4096;

}  // namespace

std::optional<ForeignSignature> find_foreign_signature_in_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string window;
  std::vector<char> buf(kChunk);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    const std::size_t n = std::size_t(in.gcount());
    if (n == 0) break;
    window.append(buf.data(), n);
    if (auto sig = find_foreign_signature(window)) return sig;
    if (window.size() > kCarry) {
      const std::size_t cut = window.size() - kCarry;
      // A carried tail that starts in the middle of a line gets a non-blank character in front, so a line-start
      // marker in it is not mistaken for one that opens the text.
      std::string tail = window.substr(cut);
      window = window[cut - 1] != '\n' ? "x" + tail : std::move(tail);
    }
  }
  return std::nullopt;
}

std::map<std::string, ForeignSignature> SignatureFileScan::scan(const fs::path& run_dir) {
  std::map<std::string, ForeignSignature> found;
  std::map<std::string, std::pair<Stamp, std::optional<ForeignSignature>>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(run_dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::string rel = it->path().lexically_relative(run_dir).generic_string();
    const Stamp stamp{st.st_dev, st.st_ino, std::uintmax_t(st.st_size), std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    const auto m = memo_.find(rel);
    std::optional<ForeignSignature> sig = m != memo_.end() && m->second.first == stamp ? m->second.second
                                                                                        : find_foreign_signature_in_file(it->path());
    seen[rel] = {stamp, sig};
    if (sig) found.emplace(rel, *sig);
  }
  memo_ = std::move(seen);  // forget removed files
  return found;
}

std::vector<fs::path> signature_file_paths(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& [rel, sig] : SignatureFileScan().scan(dir)) out.push_back(dir / rel);
  return out;
}

}  // namespace mi::agents
