// What a shell command changed in a run directory. write_file and edit_file go through the sandbox's path and
// signature rules one file at a time; `run_command` can write any file the isolation leaves writable (printf > x,
// cp, a generator script). So the sandbox snapshots the run directory before each command and compares afterwards:
// every created, changed or removed file is then judged like a write (the role's write paths, the SWITCH=OFF
// signature rule) and counted like one (edits, lines changed), and a change that is refused is undone from the
// snapshot.
//
// Every file is in the snapshot, but not every file's bytes:
//   - ordinary files up to 64 MiB: their bytes (the run directory's sources, notes and records are small text
//     files; the bytes are what a restore needs);
//   - files over 64 MiB (not text an agent writes): a fingerprint (size, inode, modification time) instead of the
//     bytes, so their creation, removal or replacement is still seen and judged. Their content cannot be restored,
//     so the sandbox mounts those that exist read-only for the command (large_files() lists them);
//   - build trees (top-level `build`, `build-*`, `build_*`) and `.git`: links only. A command may build there freely
//     and nothing in them is a source or a record, so their files' contents are not compared, but a symlink there
//     (its target) and a regular file's hard-link count are: a link out of the run directory or to a protected file is
//     judged wherever it lies. (The sandbox also mounts `.git` read-only for commands.)
// A symlink is recorded as its target, never followed (a link planted among the test contracts is a change like any
// other). A regular file's hard-link count is recorded too: a new name for a file (`ln a b`) changes the entry of
// `a`, so the sandbox sees and judges it.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mi::agents {

struct SnapshotEntry {
  std::string bytes;     // a symlink: its target; a fingerprinted file: its fingerprint; a scratch-tree file: ""
  bool symlink = false;
  std::uintmax_t links = 1;  // a regular file: its hard-link count (more than 1: it has another name somewhere)
  bool fingerprint = false;  // bytes is a fingerprint, not the content (a file over 64 MiB)
  bool scratch = false;      // in a build tree or .git: only links are compared
  bool operator==(const SnapshotEntry&) const = default;
};
using RunDirSnapshot = std::map<std::string, SnapshotEntry>;  // run-directory-relative path -> what is there

RunDirSnapshot snapshot_run_dir(const std::filesystem::path& run_dir);

// True for a top-level directory name whose contents are scratch (build trees, .git).
bool scratch_tree_name(const std::string& top_level_name);

// The fingerprinted (over 64 MiB) regular files of a snapshot outside the scratch trees, as run-directory paths.
std::vector<std::filesystem::path> large_files(const std::filesystem::path& run_dir, const RunDirSnapshot& snap);

struct FileChange {
  std::string path;                   // relative to the run directory
  std::optional<SnapshotEntry> before;  // none: created by the command
  std::optional<SnapshotEntry> after;   // none: removed by the command
  bool scratch() const { return (before && before->scratch) || (after && after->scratch); }
};

// Every file that differs between the two snapshots, sorted by path: created, removed, its bytes or kind changed,
// or its hard-link count grew (a count that only dropped is no change). In the scratch trees only links count: a
// symlink created or retargeted, or a regular file whose hard-link count grew (or that arrived with several names).
std::vector<FileChange> changed_files(const RunDirSnapshot& before, const RunDirSnapshot& after);

// Puts `change.path` back as it was before (rewritten, or removed when the command created it); a file that now has
// a second name (a hard link the command made) is re-created as a new file, so the other name no longer shares it.
// Returns false, changing nothing, when the earlier content was not kept (a fingerprinted or scratch-tree file the
// command changed or removed); a file the command created is always removed.
bool undo_change(const std::filesystem::path& run_dir, const FileChange& change);

}  // namespace mi::agents
