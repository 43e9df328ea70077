// The one judge of what a run of agent-written code changed in a run directory. Two kinds of runs are judged by it,
// each comparing a snapshot taken before with the directory afterwards (run_dir_snapshot.h):
//   - an agent's command (ToolSandbox::run_command): a change outside the build trees is ruled on by the role's write
//     paths; what stands counts as the role's edits;
//   - a gate that runs agent-written code (gate_watch.h: a gate script and what it calls, the stage tests the engine
//     gate's verifier links with the agents' sources): a change outside the build trees is always refused, since a gate
//     only builds and judges.
// Both share the rest: a new hard link, or a symlink leading out of the run directory or to a protected path, is
// refused wherever it lies (build trees included); with the source switch OFF a file carrying a foreign signature is
// refused; what is refused is undone from the snapshot (undo_change).
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agents/run_dir_snapshot.h"

namespace mi::agents {

using ChangeRule = std::pair<std::string, std::string>;  // the rule broken (a Violation's rule), why

// For a change a run made: a new hard link, or a symlink leading outside the run directory or to a protected path
// (the rule and why), or nothing.
std::optional<ChangeRule> link_rule(const std::filesystem::path& run_dir, const FileChange& c);

struct ChangeJudgement {
  // The rule a change outside the build trees breaks, by its run-directory path, or nothing when it may stand.
  std::function<std::optional<ChangeRule>(const std::string& path)> write_rule;
  bool check_signatures = false;  // SWITCH=OFF: a created or changed file carrying a foreign signature is refused
  // After an interruption the workflow may have written its records (which runs see read-only) before the judge ran:
  // changes to them are not the run's.
  bool skip_records = false;
};

struct JudgedChange {
  FileChange change;
  std::optional<ChangeRule> refused;  // the rule it broke; none: it stands
  bool undone = false;                // refused and put back as it was before the run
  // "the <what>'s change was undone" or "... could NOT be undone (its earlier content was not kept)"
  std::string undo_note(const std::string& what) const;
};

// Every change in `run_dir` since `before` (the command journal's own files aside, command_journal.h), ruled on in
// this order: write_rule (outside the build trees), link_rule, signatures; each refused change undone.
std::vector<JudgedChange> judge_run_dir_changes(const std::filesystem::path& run_dir, const RunDirSnapshot& before, bool git_existed,
                                                const ChangeJudgement& judgement);

// What a judged run must get read-only besides the protected paths: an existing .git, whose contents the snapshot
// does not keep, and the files over 64 MiB outside the build trees, whose content it does not keep either (a change
// to them could not be undone).
std::vector<std::filesystem::path> unrestorable_paths(const std::filesystem::path& run_dir, const RunDirSnapshot& before, bool git_existed);

}  // namespace mi::agents
