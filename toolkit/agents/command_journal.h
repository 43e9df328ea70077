// A command in flight, on disk. The sandbox judges what a command changed by comparing snapshots of the run directory
// taken before and after it (run_dir_snapshot.h). If the process running the sandbox dies while the command runs (a
// wall-clock limit, a kill, a crash), the "after" half never happens, and whatever the command wrote would stand
// unjudged: a file outside the role's write paths (a CKB delta written by the implementer, say), a foreign signature
// with the switch OFF. So the sandbox writes the "before" snapshot here before the command starts and removes it once
// the changes are judged; a sandbox opened on a run directory that still holds one judges the interrupted command's
// changes first (ToolSandbox's constructor), and no gate runs while one is there (require_untampered).
//
// A gate that runs agent-written code is journaled the same way (gate_watch.h; `gate` set, `role` "gate" and `command`
// the gate's name): an interrupted gate's changes are judged by the gate's rule, never left standing.
//
// The journal lives in .metainfer/, a workflow record path that commands and gates see read-only.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "agents/run_dir_snapshot.h"
#include "agents/source_switch.h"

namespace mi::agents {

struct CommandJournal {
  std::string role;     // the role whose command it was
  std::string command;
  bool git_existed = false;  // whether .git was a scratch tree for it (snapshot_run_dir's git_is_scratch)
  RunDirSnapshot before;
  SourceSwitch source_switch = SourceSwitch::off;  // the switch it ran under: its changes are judged by that one
  bool gate = false;  // a gate's run (gate_watch.h), judged by the gate's rule rather than a role's write paths
};

std::filesystem::path command_journal_path(const std::filesystem::path& run_dir);
// Written durably (to a temporary name, then renamed) before the command starts.
void write_command_journal(const std::filesystem::path& run_dir, const CommandJournal& j);
// The journal of an interrupted command, if there is one; mi::Error when it cannot be read.
std::optional<CommandJournal> read_command_journal(const std::filesystem::path& run_dir);
void clear_command_journal(const std::filesystem::path& run_dir);

}  // namespace mi::agents
