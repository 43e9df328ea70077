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
//   - build trees (top-level `build`, `build-*`, `build_*`) and an existing `.git`: a fingerprint per file. A command
//     may build there freely and nothing in them is a source or a record, so their contents are not kept, but what
//     a command created or rewrote there is seen: the sandbox judges it for links (a symlink's target, a regular
//     file's hard-link count: a link out of the run directory or to a protected file is judged wherever it lies) and,
//     with the switch OFF, for foreign signatures, and removes what it refuses (a build output; the build makes it
//     again). Never counted as edits. `.git` is a scratch tree only when it was there before the command (the sandbox
//     then mounts it read-only): one a command creates is judged like any other path (no role may write it).
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
  std::string bytes;     // a symlink: its target; a fingerprinted file (over 64 MiB, or in a scratch tree): its fingerprint
  bool symlink = false;
  std::uintmax_t links = 1;  // a regular file: its hard-link count (more than 1: it has another name somewhere)
  bool fingerprint = false;  // bytes is a fingerprint, not the content (a file over 64 MiB or in a scratch tree)
  bool scratch = false;      // in a build tree or an existing .git: judged for links and signatures only
  bool operator==(const SnapshotEntry&) const = default;
};
using RunDirSnapshot = std::map<std::string, SnapshotEntry>;  // run-directory-relative path -> what is there

// git_is_scratch: whether a top-level .git is a scratch tree (the sandbox passes whether it existed before the
// command, for both snapshots of that command).
RunDirSnapshot snapshot_run_dir(const std::filesystem::path& run_dir, bool git_is_scratch = true);

// True for a top-level directory name whose contents are scratch (build trees, .git).
bool scratch_tree_name(const std::string& top_level_name);
// The same, with .git a scratch tree only when git_is_scratch.
bool scratch_tree_name(const std::string& top_level_name, bool git_is_scratch);

// The fingerprinted (over 64 MiB) regular files of a snapshot outside the scratch trees, as run-directory paths.
std::vector<std::filesystem::path> large_files(const std::filesystem::path& run_dir, const RunDirSnapshot& snap);

struct FileChange {
  std::string path;                   // relative to the run directory
  std::optional<SnapshotEntry> before;  // none: created by the command
  std::optional<SnapshotEntry> after;   // none: removed by the command
  bool scratch() const { return (before && before->scratch) || (after && after->scratch); }
};

// Every file that differs between the two snapshots, sorted by path: created, removed, its bytes or kind changed,
// or its hard-link count grew (a count that only dropped is no change). In the scratch trees: a file created or
// rewritten (fingerprint), a symlink created or retargeted, a regular file whose hard-link count grew; a removal there
// is no change.
std::vector<FileChange> changed_files(const RunDirSnapshot& before, const RunDirSnapshot& after);

// Puts `change.path` back as it was before (rewritten, or removed when the command created it); a file that now has
// a second name (a hard link the command made) is re-created as a new file, so the other name no longer shares it.
// Returns false, changing nothing, when the earlier content was not kept (a file over 64 MiB the command changed or
// removed); a file the command created is always removed, and so is a scratch-tree file it rewrote (a build output).
bool undo_change(const std::filesystem::path& run_dir, const FileChange& change);

}  // namespace mi::agents
