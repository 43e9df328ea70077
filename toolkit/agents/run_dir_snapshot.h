// What a shell command changed in a run directory. write_file and edit_file go through the sandbox's path and
// signature rules one file at a time; `run_command` can write any file the isolation leaves writable (printf > x,
// cp, a generator script). So the sandbox snapshots the run directory before each command and compares afterwards:
// every created, changed or removed file is then judged like a write (the role's write paths, the SWITCH=OFF
// signature rule) and counted like one (edits, lines changed), and a change that is refused is undone from the
// snapshot.
//
// The snapshot keeps each file's bytes (the run directory's sources, notes and records are small text files; the
// bytes are what a restore needs). Left out: build trees (top-level `build`, `build-*`, `build_*`: a command may
// build there freely and nothing in them is a source or a record), `.git`, and files over 64 MiB (not text an agent
// writes). A symlink is recorded as its target, never followed (a link planted among the test contracts is a change
// like any other). A regular file's hard-link count is recorded too: a new name for a file (`ln a b`, even when `b`
// lies in a build tree the snapshot skips) changes the entry of `a`, so the sandbox sees and judges it.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mi::agents {

struct SnapshotEntry {
  std::string bytes;     // a symlink: its target
  bool symlink = false;
  std::uintmax_t links = 1;  // a regular file: its hard-link count (more than 1: it has another name somewhere)
  bool operator==(const SnapshotEntry&) const = default;
};
using RunDirSnapshot = std::map<std::string, SnapshotEntry>;  // run-directory-relative path -> what is there

RunDirSnapshot snapshot_run_dir(const std::filesystem::path& run_dir);

struct FileChange {
  std::string path;                   // relative to the run directory
  std::optional<SnapshotEntry> before;  // none: created by the command
  std::optional<SnapshotEntry> after;   // none: removed by the command
};

// Every file that differs between the two snapshots, sorted by path: created, removed, its bytes or kind changed,
// or its hard-link count grew (a count that only dropped is no change).
std::vector<FileChange> changed_files(const RunDirSnapshot& before, const RunDirSnapshot& after);

// Puts `change.path` back as it was before (rewritten, or removed when the command created it); a file that now has
// a second name (a hard link the command made) is re-created as a new file, so the other name no longer shares it.
void undo_change(const std::filesystem::path& run_dir, const FileChange& change);

}  // namespace mi::agents
