// The only way an agent acts: every tool call of every role goes through ToolSandbox::call, which checks the role's
// grants and the path and source policies before doing anything, and records what it refused.
//
// Paths: relative ones are resolved against the run directory; "@ckb/..." names a file of the CKB; absolute paths
// are accepted only to be classified. Every path is canonicalised (symlinks resolved, "." and ".." folded) before
// it is classified, so neither ".." nor a symlink planted in the run directory reaches outside it; a write never
// goes through a symlink (a dangling one is left unresolved by canonicalisation) nor into a hard-linked file. Classes:
//   reference  inside a configured reference tree: readable only by the explorer with SWITCH=ON (logged)
//   run        inside the run directory: readable, but for the workflow's hidden records (transcripts/, .metainfer/,
//              metrics.json, summary.md: protected_files.h), which no role may read or list; writable where the role's
//              write_paths allow and the path is not protected (test contracts, gate scripts, the workflow's records)
//   ckb        inside the CKB: read-only for every role (a staged delta lives in the run directory)
//   outside    anything else: refused
// With SWITCH=OFF a file whose text carries a foreign-framework signature (source_switch.h) is refused wherever it
// lies, and writing such text is refused too. run_command is held to the same rules: a command naming a reference
// tree is refused unrun; files of the run directory and the CKB that carry a signature are hidden from every command
// (an empty file is mounted over them: a filter of the output could be bypassed by re-encoding the file), and a
// command naming one is refused unrun; output carrying a signature is still withheld; what the command changed in
// the run directory (run_dir_snapshot.h; build trees for links and signatures only) is judged like a write, also
// after a kill (command_journal.h), and a new hard link or a symlink leading out of the run directory or
// to a protected path is refused: refused changes are undone, accepted ones counted as edits. The workflow's
// records are hidden from every command as well (isolated_command.h), and a command naming one is refused unrun.
// Every command runs under an strace audit where strace is available (command_audit.h): a hidden path (a reference
// tree, a signature file, a record, foreign sources installed on the system) the command reached for by a path the
// naming check cannot see (built at run time, reached through a `cd`) is counted as a violation too; without strace
// the command's result says its accesses were not audited. Each
// refusal by policy is a Violation; plain failures (no such file,
// an `old` string that is not there) are errors the agent can fix and are not counted as violations. Violations
// and reference reads are also appended, as they happen, to .metainfer/violations.jsonl and
// .metainfer/reference_access.jsonl in the run directory, so an interrupted run keeps them.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/agent_role.h"
#include "agents/isolated_command.h"
#include "agents/run_dir_snapshot.h"
#include "agents/signature_files.h"
#include "agents/source_switch.h"

namespace mi::agents {

struct SandboxConfig {
  std::filesystem::path run_dir, ckb_dir;
  std::vector<std::filesystem::path> reference_paths;
  SourceSwitch source_switch = SourceSwitch::off;
  double command_timeout_s = 600;
  std::size_t max_output_bytes = 32 * 1024;   // run_command output kept (its tail)
  std::size_t max_read_bytes = 256 * 1024;    // read_file answer
  std::size_t max_search_hits = 60;
};

struct Violation {
  std::string role, tool, path;
  std::string rule;    // reference_path | foreign_signature | workflow_record | path_escape | protected_path |
                       // write_not_granted | tool_not_granted | symlink | hard_link | gate_write (agent-written code a
                       // gate ran changed the run directory: gate_watch.h) | delta_outside_knowledge,
                       // delta_changed_after_staging (both recorded by the evolution workflow)
  std::string detail;
};

struct ReferenceAccess {
  std::string role, tool, path;
};

struct ToolOutcome {
  bool ok = false;
  bool violation = false;   // refused by policy (a Violation was recorded)
  std::string output;       // what goes back to the model
  int edits = 0;            // files changed (run_command may change several)
  long lines_added = 0, lines_removed = 0;
};

class ToolSandbox {
 public:
  explicit ToolSandbox(SandboxConfig config);

  ToolOutcome call(const AgentRoleSpec& role, const std::string& tool, const nlohmann::json& arguments);

  const std::vector<Violation>& violations() const { return violations_; }
  const std::vector<ReferenceAccess>& reference_accesses() const { return accesses_; }
  const SandboxConfig& config() const { return config_; }
  // A refusal the workflow made outside a tool call (a CKB delta that writes outside the knowledge layers):
  // recorded and logged like the sandbox's own, so the run's metrics count it.
  void record_violation(const Violation& v);
  // The evolution loop explores with the switch as configured and does everything else with it off.
  void set_source_switch(SourceSwitch s) { config_.source_switch = s; }

 private:
  enum class Area { run, ckb, reference, outside };
  struct Resolved {
    std::filesystem::path path;
    Area area = Area::outside;
    std::string shown;  // how messages name it: relative to its area
  };

  Resolved resolve(const std::string& text) const;
  ToolOutcome refuse(const AgentRoleSpec& role, const std::string& tool, const std::string& path, const std::string& rule,
                     const std::string& detail);
  // Read access to `r` for `role` (area + switch); on refusal fills `out` and returns false.
  bool may_read(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out);
  bool may_write(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out);
  // For a run-directory path about to be written: refuses (and counts) a symlink among its components (a dangling
  // one, which resolve() could not follow, would lead the write anywhere) and a file with more than one name.
  bool may_write_through_links(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out);
  // Writes `content` to `r` (O_NOFOLLOW; refusing a hard-linked file again at open): ok, an error, or a refusal.
  ToolOutcome write_content(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, const std::string& content);
  // For a run-directory path: the rule that forbids `role` to write it and why, or nothing when it may.
  std::optional<std::pair<std::string, std::string>> write_rule(const AgentRoleSpec& role, const std::string& rel) const;
  void log_access(const AgentRoleSpec& role, const std::string& tool, const Resolved& r);
  // Judges what a command changed in the run directory since `before` (write paths, links, signatures), undoing and
  // counting what it refuses and adding the rest to out's edits; `interrupted` ("" or why) is appended to each
  // refusal's detail.
  void judge_command_changes(const AgentRoleSpec& role, const RunDirSnapshot& before, bool git_existed,
                             const std::string& interrupted, ToolOutcome& out, std::string& notes);
  // The journal of a command or gate whose process died mid-run (command_journal.h, gate_watch.h): its changes judged
  // now.
  void judge_interrupted_command();
  // The hidden paths the audit saw a command reach for (command_audit.h), each recorded as a violation under the rule
  // of what it hides: reference_path, foreign_signature (`foreign`: the signature files hidden, and why) or
  // workflow_record.
  void judge_audited_accesses(const AgentRoleSpec& role, const std::string& command, const CommandResult& r,
                              const std::vector<std::pair<std::filesystem::path, std::string>>& foreign, ToolOutcome& out,
                              std::string& notes);
  // SWITCH=OFF content check; true when `text` may be handed over.
  bool clean_content(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, std::string_view text, ToolOutcome& out);

  ToolOutcome list_dir(const AgentRoleSpec& role, const nlohmann::json& a);
  ToolOutcome read_file(const AgentRoleSpec& role, const nlohmann::json& a);
  ToolOutcome search_ckb(const AgentRoleSpec& role, const nlohmann::json& a);
  ToolOutcome write_file(const AgentRoleSpec& role, const nlohmann::json& a);
  ToolOutcome edit_file(const AgentRoleSpec& role, const nlohmann::json& a);
  ToolOutcome run_command(const AgentRoleSpec& role, const nlohmann::json& a);

  SandboxConfig config_;
  std::vector<std::filesystem::path> references_;  // canonical
  std::vector<Violation> violations_;
  std::vector<ReferenceAccess> accesses_;
  // Files carrying a foreign signature, hidden from commands (signature_files.h); memoised across commands.
  SignatureFileScan run_signatures_, ckb_signatures_;
};

}  // namespace mi::agents
