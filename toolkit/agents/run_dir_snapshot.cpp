#include "agents/run_dir_snapshot.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxSnapshotFileBytes = std::uintmax_t(64) << 20;

bool scratch_top_level(const std::string& name) {
  return name == "build" || name.rfind("build-", 0) == 0 || name.rfind("build_", 0) == 0 || name == ".git";
}

}  // namespace

RunDirSnapshot snapshot_run_dir(const fs::path& run_dir) {
  RunDirSnapshot snap;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(run_dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(run_dir);
    if (it.depth() == 0 && it->is_directory(ec) && !it->is_symlink(ec) && scratch_top_level(rel.generic_string())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink(ec)) {
      snap.emplace(rel.generic_string(), SnapshotEntry{fs::read_symlink(it->path(), ec).string(), true});
      continue;
    }
    if (!it->is_regular_file(ec) || it->file_size(ec) > kMaxSnapshotFileBytes) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    const std::uintmax_t links = it->hard_link_count(ec);
    snap.emplace(rel.generic_string(), SnapshotEntry{s.str(), false, ec ? 1 : links});
  }
  return snap;
}

std::vector<FileChange> changed_files(const RunDirSnapshot& before, const RunDirSnapshot& after) {
  std::vector<FileChange> out;
  for (const auto& [path, bytes] : before) {
    const auto now = after.find(path);
    if (now == after.end()) out.push_back({path, bytes, std::nullopt});
    else if (now->second.bytes != bytes.bytes || now->second.symlink != bytes.symlink || now->second.links > bytes.links)
      out.push_back({path, bytes, now->second});
  }
  for (const auto& [path, bytes] : after)
    if (!before.count(path)) out.push_back({path, std::nullopt, bytes});
  std::sort(out.begin(), out.end(), [](const FileChange& a, const FileChange& b) { return a.path < b.path; });
  return out;
}

void undo_change(const fs::path& run_dir, const FileChange& change) {
  const fs::path file = run_dir / change.path;
  std::error_code ec;
  // A symlink is removed, never written through; a file another name shares (a hard link) is replaced by a new one
  // (same permissions) rather than rewritten in place, which would rewrite the other name too.
  std::optional<fs::perms> keep_perms;
  const fs::file_status st = fs::symlink_status(file, ec);
  if (fs::is_regular_file(st) && fs::hard_link_count(file, ec) > 1 && !ec) keep_perms = st.permissions();
  if (fs::is_symlink(st) || keep_perms || !change.before || change.before->symlink) fs::remove(file, ec);
  if (!change.before) return;
  fs::create_directories(file.parent_path());
  if (change.before->symlink) {
    fs::create_symlink(change.before->bytes, file, ec);
    if (ec) fail(file.string(), ": cannot restore the symlink a command changed: ", ec.message());
    return;
  }
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << change.before->bytes;
    if (!out) fail(file.string(), ": cannot restore the content a command changed");
  }
  if (keep_perms) fs::permissions(file, *keep_perms, ec);
}

}  // namespace mi::agents
