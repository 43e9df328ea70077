// Test contracts and gate scripts in a run directory are out of every agent's reach: the sandbox refuses writes to
// them (path policy), and because a policy can have holes (a build command that rewrites a file, a bug in the
// sandbox), the workflow also snapshots their sha256 when it lays them down and calls require_untampered() before
// every gate run. A gate never runs against a contract an agent could have weakened.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mi::agents {

// Globs (run-directory relative) of what the gates judge with: the engine's stage tests, gate scripts, test
// contracts, the engine manifest, its top-level CMakeLists.txt (the build that compiles the stage tests) and the
// coverage plan the generator laid down (plan.json: the final gates take the architecture and max_context from it).
// Hashed, and never writable by an agent.
const std::vector<std::string>& default_protected_globs();
// The workflow's own records (transcripts, gate reports, metrics, violation logs, this manifest): never writable by an agent
// either, but not hashed, because the workflow itself appends to them while agents run.
const std::vector<std::string>& workflow_record_globs();
// The records no agent may read either: every record but the gate reports (reports/**, the evidence the implementer and
// the failure analyst are told to read). Transcripts hold every tool result of every role, the explorer's reads of
// reference trees under SWITCH=ON included; the logs and metrics name what was refused and where the references lie.
// No tool hands them over (read_file, list_dir, search_ckb), and they are hidden from every isolated command and gate
// run (isolated_command.h). Roles communicate through their own files (strategy/, exploration/, review/, failure/,
// ckb_delta/, experiment/) and the gate reports; the experiment summariser gets the measured figures in its task.
const std::vector<std::string>& hidden_record_globs();
// Whether `rel` (run-directory relative, '/'-separated) is a hidden record or one of their directories.
bool is_hidden_record(const std::string& rel);
// For each hidden-record glob, its part before the first wildcard (".metainfer/**" -> run_dir/.metainfer,
// "metrics.json" -> run_dir/metrics.json), whether or not it exists.
std::vector<std::filesystem::path> hidden_record_paths(const std::filesystem::path& run_dir);

struct ProtectedManifest {
  std::map<std::string, std::string> sha256;  // relative path -> sha256 (a symlink: "symlink:" + its target)
};

// Every regular file or symlink under run_dir whose relative path matches one of `globs`.
ProtectedManifest snapshot_protected(const std::filesystem::path& run_dir, const std::vector<std::string>& globs);
void write_protected_manifest(const std::filesystem::path& file, const ProtectedManifest& m);
ProtectedManifest read_protected_manifest(const std::filesystem::path& file);

struct TamperReport {
  std::vector<std::string> modified, missing, added;
  bool clean() const { return modified.empty() && missing.empty() && added.empty(); }
  std::string describe() const;
};

TamperReport check_protected(const std::filesystem::path& run_dir, const ProtectedManifest& expected,
                             const std::vector<std::string>& globs);

// The run-directory paths that isolated commands get mounted read-only: for each protected or record glob, its part
// before the first wildcard ("tests/**" -> run_dir/tests, "metrics.json" -> run_dir/metrics.json).
std::vector<std::filesystem::path> protected_mount_points(const std::filesystem::path& run_dir);

// Where the workflow keeps the manifest inside a run directory.
std::filesystem::path protected_manifest_path(const std::filesystem::path& run_dir);

// Before a gate: throws mi::Error listing every modified, missing or added protected file (or a missing manifest), or
// when a command's changes were left unjudged by an interruption (command_journal.h).
void require_untampered(const std::filesystem::path& run_dir, const std::vector<std::string>& globs = default_protected_globs());

}  // namespace mi::agents
