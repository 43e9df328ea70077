#include "agents/run_dir_snapshot.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxSnapshotFileBytes = std::uintmax_t(64) << 20;

std::string fingerprint_of(const struct stat& st) {
  return "size=" + std::to_string(st.st_size) + " dev=" + std::to_string(st.st_dev) + " ino=" + std::to_string(st.st_ino) +
         " mtime=" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

// Gives `file` an inode of its own (same bytes and permissions): the other names of a hard link keep the old one.
void unshare_inode(const fs::path& file) {
  const fs::path tmp = file.parent_path() / (".metainfer-unlink-" + file.filename().string());
  std::error_code ec;
  fs::remove(tmp, ec);
  if (!fs::copy_file(file, tmp, fs::copy_options::overwrite_existing, ec) || ec)
    fail(file.string(), ": cannot break the hard link a command made: ", ec.message());
  fs::permissions(tmp, fs::status(file).permissions(), ec);
  fs::rename(tmp, file);
}

}  // namespace

bool scratch_tree_name(const std::string& name) {
  return name == "build" || name.rfind("build-", 0) == 0 || name.rfind("build_", 0) == 0 || name == ".git";
}

bool scratch_tree_name(const std::string& name, bool git_is_scratch) {
  return scratch_tree_name(name) && (git_is_scratch || name != ".git");
}

RunDirSnapshot snapshot_run_dir(const fs::path& run_dir, bool git_is_scratch) {
  RunDirSnapshot snap;
  std::error_code ec;
  bool in_scratch = false;
  for (auto it = fs::recursive_directory_iterator(run_dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(run_dir);
    const std::string top = rel.begin()->string();
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (it.depth() == 0) in_scratch = S_ISDIR(st.st_mode) && scratch_tree_name(top, git_is_scratch);
    if (S_ISLNK(st.st_mode)) {
      snap.emplace(rel.generic_string(), SnapshotEntry{fs::read_symlink(it->path(), ec).string(), true, 1, false, in_scratch});
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    SnapshotEntry e;
    e.links = st.st_nlink;
    e.scratch = in_scratch;
    if (in_scratch || std::uintmax_t(st.st_size) > kMaxSnapshotFileBytes) {
      e.fingerprint = true;
      e.bytes = fingerprint_of(st);
    } else {
      std::ifstream in(it->path(), std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      e.bytes = s.str();
    }
    snap.emplace(rel.generic_string(), std::move(e));
  }
  return snap;
}

std::vector<fs::path> large_files(const fs::path& run_dir, const RunDirSnapshot& snap) {
  std::vector<fs::path> out;
  for (const auto& [path, e] : snap)
    if (e.fingerprint && !e.scratch) out.push_back(run_dir / path);
  return out;
}

std::vector<FileChange> changed_files(const RunDirSnapshot& before, const RunDirSnapshot& after) {
  std::vector<FileChange> out;
  // In a scratch tree: a file created, or rewritten (its fingerprint changed), and a symlink now there (new or
  // retargeted); a file with a new name. The sandbox judges these for links and signatures only.
  auto scratch_link = [](const std::optional<SnapshotEntry>& b, const SnapshotEntry& a) {
    if (a.symlink) return !b || !b->symlink || b->bytes != a.bytes;
    return !b || b->symlink || b->bytes != a.bytes || a.links > b->links;
  };
  for (const auto& [path, was] : before) {
    const auto now = after.find(path);
    if (now == after.end()) {
      if (!was.scratch) out.push_back({path, was, std::nullopt});
    } else if (was.scratch || now->second.scratch) {
      if (scratch_link(was, now->second)) out.push_back({path, was, now->second});
    } else if (now->second.bytes != was.bytes || now->second.symlink != was.symlink || now->second.fingerprint != was.fingerprint ||
               now->second.links > was.links) {
      out.push_back({path, was, now->second});
    }
  }
  for (const auto& [path, now] : after)
    if (!before.count(path) && (!now.scratch || scratch_link(std::nullopt, now))) out.push_back({path, std::nullopt, now});
  std::sort(out.begin(), out.end(), [](const FileChange& a, const FileChange& b) { return a.path < b.path; });
  return out;
}

bool undo_change(const fs::path& run_dir, const FileChange& change) {
  const fs::path file = run_dir / change.path;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(file, ec);
  if (!change.before) {  // created by the command: removed, whatever it is
    fs::remove(file, ec);
    return true;
  }
  const SnapshotEntry& was = *change.before;
  if (!was.symlink && (was.fingerprint || was.scratch)) {
    // The content was not kept. What can be undone without it: a new name for the same file (the hard-link count
    // grew, the content is the same as far as the snapshot knows) is broken by giving this name its own copy.
    if (fs::is_regular_file(st) && change.after && !change.after->symlink && change.after->bytes == was.bytes &&
        change.after->links > was.links) {
      unshare_inode(file);
      return true;
    }
    // A build tree's file is a build output: removed, the next build makes it again.
    if (was.scratch && !was.symlink) {
      fs::remove(file, ec);
      return !ec;
    }
    return false;
  }
  // A symlink is removed, never written through; a file another name shares (a hard link) is replaced by a new one
  // (same permissions) rather than rewritten in place, which would rewrite the other name too.
  std::optional<fs::perms> keep_perms;
  if (fs::is_regular_file(st) && fs::hard_link_count(file, ec) > 1 && !ec) keep_perms = st.permissions();
  if (fs::is_symlink(st) || keep_perms || was.symlink) fs::remove(file, ec);
  fs::create_directories(file.parent_path());
  if (was.symlink) {
    fs::create_symlink(was.bytes, file, ec);
    if (ec) fail(file.string(), ": cannot restore the symlink a command changed: ", ec.message());
    return true;
  }
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << was.bytes;
    if (!out) fail(file.string(), ": cannot restore the content a command changed");
  }
  if (keep_perms) fs::permissions(file, *keep_perms, ec);
  return true;
}

}  // namespace mi::agents
