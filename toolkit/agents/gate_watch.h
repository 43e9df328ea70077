// A gate that runs agent-written code, judged like an agent's command. The script gate runs gates/<stage>.sh, which
// may call what agents wrote; the engine stage gate's verifier builds the agents' sources and runs the stage tests
// linked with them (a static initializer in src/ runs there). Both run in the isolation agents' commands get, the
// run directory writable but for the protected paths: without a judge, what that code writes while the gate runs (a
// CKB delta, the explorer's notes, another role's files, the plan the final gates read before it was protected)
// would stand unjudged, uncounted and unreverted, and the gate could still pass.
//
// So a gate is watched: before it runs, the run directory is snapshotted and the snapshot journaled
// (command_journal.h, as a gate's); afterwards everything the gate changed outside the build trees (top-level
// `build`, `build-*`, `build_*`: a gate builds there, and its evidence goes to the caller, never into the run
// directory) is refused by the rule gate_write, undone, and returned as a Violation (role "gate", tool "gate"), which
// the stage loop records in the run's violation log and metrics; links and hard links are judged in the build trees
// too (change_judge.h, the judge agents' commands get). A gate that changed anything FAILS, its evidence naming every
// change. If the process dies while the gate runs, the journal stays: no gate runs while it is there
// (require_untampered), and the next sandbox opened on the run directory, or the next command of this one, judges
// it by the same rule.
//
// And a gate's run is audited as an agent's command is (command_audit.h): the hidden paths (reference trees, files
// carrying a foreign signature, the workflow's records, foreign sources installed on the system) that any process of
// the gate reached for, by whatever path it built, are violations under the rule of what hides them, and the gate
// FAILS (judge_gate_accesses). Without strace the gate's evidence says its accesses were not audited.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "agents/change_judge.h"
#include "agents/run_dir_snapshot.h"
#include "agents/tool_sandbox.h"

namespace mi::agents {

// The rule of a gate's run: nothing outside the build trees may change.
std::optional<ChangeRule> gate_write_rule(const std::string& gate, const std::string& path);

// Judges and undoes what a gate named `gate` changed since `before` (GateWatch::judge, and the journal of an
// interrupted gate with `interrupted` saying so, appended to each violation's detail).
std::vector<Violation> judge_gate_changes(const std::filesystem::path& run_dir, const std::string& gate, const RunDirSnapshot& before,
                                          bool git_existed, const std::string& interrupted = "");

// The evidence a gate that changed the run directory gives: a line per violation (empty when there is none).
std::string describe_gate_violations(const std::string& gate, const std::vector<Violation>& violations);

// The hidden paths the audited run `r` of gate `gate` reached for (r.audited; none otherwise), one Violation (role
// "gate", tool "gate") per hidden path under its rule (command_audit.h classify_hidden_paths): `references` are the
// caller's reference trees, the files of `run_dir` among r.hidden that are not records are the signature files the
// gate hid. `command_text`: what the gate ran as its own text (the gate script), whose wildcards explain an access to a
// hidden file as for an agent's command. `trusted_program`: the run's tagged process is a program the toolkit trusts
// (the engine gate's verifier, isolated_command.h `program`), whose own accesses are judged as a walk's (it opens what
// it lists or was given: its scan of the engine directory opens metrics.json by full path, and finds it covered):
// a hidden file it opens does not count, a path below a hidden directory still does. Every process it starts (the
// build, the compiler, the stage tests) is judged in full. The verifier runs its scans in its main thread; a thread
// of it (a PID of its own in the log) would be judged as a process it started: noisy, never blind.
std::vector<Violation> judge_gate_accesses(const std::filesystem::path& run_dir, const std::string& gate, const CommandResult& r,
                                           const std::vector<std::filesystem::path>& references, const std::string& command_text,
                                           bool trusted_program = false);

// The evidence of a gate's audited run: a line per hidden path reached (judge_gate_accesses), or, when `r` was not
// audited (no strace), a line saying so; empty for an audited run that reached for nothing.
std::string describe_gate_accesses(const std::string& gate, const CommandResult& r, const std::vector<Violation>& reached);

class GateWatch {
 public:
  // Snapshots the run directory and journals it. mi::Error when a journal is already there: an interrupted command's
  // or gate's changes are unjudged, and no gate runs on them.
  GateWatch(std::filesystem::path run_dir, std::string gate);
  GateWatch(const GateWatch&) = delete;
  GateWatch& operator=(const GateWatch&) = delete;

  // What the gate's isolation must mount read-only besides the protected paths (change_judge.h unrestorable_paths).
  const std::vector<std::filesystem::path>& readonly() const { return readonly_; }
  // Judges the gate's changes (undoing what is refused) and clears the journal; the violations, none when the gate
  // changed nothing outside the build trees. Call once, whether the gate ran, failed or timed out.
  std::vector<Violation> judge();

 private:
  std::filesystem::path run_dir_;
  std::string gate_;
  bool git_existed_ = false;
  RunDirSnapshot before_;
  std::vector<std::filesystem::path> readonly_;
};

}  // namespace mi::agents
