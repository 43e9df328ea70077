#include "agents/gate_watch.h"

#include "agents/change_judge.h"
#include "agents/command_audit.h"
#include "agents/command_journal.h"
#include "agents/command_paths.h"
#include "agents/protected_files.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

std::optional<ChangeRule> gate_write_rule(const std::string& gate, const std::string& path) {
  return ChangeRule{"gate_write", path + " was changed while the gate " + gate +
                                      " ran agent-written code; a gate may write only its build trees (build/, build-*/, build_*/)"};
}

std::vector<Violation> judge_gate_changes(const fs::path& run_dir, const std::string& gate, const RunDirSnapshot& before, bool git_existed,
                                          const std::string& interrupted) {
  ChangeJudgement judgement;
  judgement.write_rule = [&](const std::string& path) { return gate_write_rule(gate, path); };
  // The build trees are the gate's own output, removed before the next gate builds; commands never see a file there
  // that carries a foreign signature (signature_files.h), so they are judged for links only.
  judgement.check_signatures = false;
  judgement.skip_records = !interrupted.empty();
  std::vector<Violation> out;
  for (const JudgedChange& j : judge_run_dir_changes(run_dir, before, git_existed, judgement))
    if (j.refused) {
      const char* what = !j.change.before ? "created" : !j.change.after ? "removed" : "changed";
      out.push_back({"gate", "gate", j.change.path, j.refused->first,
                     j.refused->second + " (" + what + "); " + j.undo_note("gate") + interrupted});
    }
  return out;
}

std::string describe_gate_violations(const std::string& gate, const std::vector<Violation>& violations) {
  if (violations.empty()) return "";
  std::string s = "gate " + gate + " FAILED: the agent-written code it ran changed the run directory (" + std::to_string(violations.size()) +
                  " file(s)); each change is a violation:\n";
  for (const auto& v : violations) s += "  refused (" + v.rule + "): " + v.path + ": " + v.detail + "\n";
  return s;
}

std::vector<Violation> judge_gate_accesses(const fs::path& run_dir, const std::string& gate, const CommandResult& r,
                                           const std::vector<fs::path>& references, const std::string& command_text,
                                           bool trusted_program) {
  std::vector<Violation> out;
  if (!r.audited) return out;
  std::vector<FileAccess> accesses = r.accesses;
  if (trusted_program)
    for (FileAccess& a : accesses)
      if (a.by_tagged) a.walk = true;
  std::vector<fs::path> refs;
  for (const fs::path& p : references) {
    std::error_code ec;
    refs.push_back(p);
    if (const fs::path c = fs::weakly_canonical(p, ec); !ec) refs.push_back(c);
  }
  // The run directory's hidden files that are not records: the files carrying a foreign signature the gate hid.
  std::vector<std::pair<fs::path, std::string>> foreign;
  for (const fs::path& h : r.hidden)
    if (path_within(h, run_dir) && !is_hidden_record(h.lexically_relative(run_dir).generic_string()))
      foreign.push_back({h, h.lexically_relative(run_dir).generic_string() + ", which carries a foreign framework's source signature"});
  const std::vector<HiddenPath> hidden = classify_hidden_paths(r.hidden, run_dir, refs, foreign);
  for (const ReachedHiddenPath& reached : reached_hidden_paths(accesses, hidden, command_text, run_dir)) {
    const HiddenPath& h = hidden[reached.hidden];
    const std::string shown = violation_path(h, run_dir);
    out.push_back({"gate", "gate", shown, h.rule,
                   "code the gate " + gate + " ran reached for " + h.shown + " (" + describe_accesses(reached.accesses) +
                       "); it is hidden from gates, so it found nothing there, and the attempt counts and fails the gate"});
  }
  return out;
}

std::string describe_gate_accesses(const std::string& gate, const CommandResult& r, const std::vector<Violation>& reached) {
  if (!r.audited)
    return "gate " + gate + ": file accesses not audited (no strace here): hidden paths stay hidden, but an attempt to reach "
           "one is not counted\n";
  if (reached.empty()) return "";
  std::string s = "gate " + gate + " FAILED: the code it ran reached for " + std::to_string(reached.size()) +
                  " hidden path(s); each attempt is a violation:\n";
  for (const auto& v : reached) s += "  refused (" + v.rule + "): " + v.path + ": " + v.detail + "\n";
  return s;
}

GateWatch::GateWatch(fs::path run_dir, std::string gate) : run_dir_(std::move(run_dir)), gate_(std::move(gate)) {
  if (fs::exists(command_journal_path(run_dir_)))
    fail(run_dir_.string(), ": a command or gate was interrupted and what it changed has not been judged yet (",
         command_journal_path(run_dir_).string(), "); the gate ", gate_, " does not run");
  std::error_code ec;
  git_existed_ = fs::is_directory(fs::symlink_status(run_dir_ / ".git", ec));
  before_ = snapshot_run_dir(run_dir_, git_existed_);
  readonly_ = unrestorable_paths(run_dir_, before_, git_existed_);
  // .metainfer/ (where the journal goes) is a record path, read-only for the gate: it exists before the gate runs, so
  // that it is among the read-only mounts.
  fs::create_directories(run_dir_ / ".metainfer");
  write_command_journal(run_dir_, {"gate", gate_, git_existed_, before_, SourceSwitch::off, true});
}

std::vector<Violation> GateWatch::judge() {
  std::vector<Violation> v = judge_gate_changes(run_dir_, gate_, before_, git_existed_);
  clear_command_journal(run_dir_);
  return v;
}

}  // namespace mi::agents
