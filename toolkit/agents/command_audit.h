// What an agent's command reached for, from the kernel's side: the isolation (isolated_command.h) keeps hidden paths
// out of a command's reach, and the naming check (command_paths.h) counts the attempts it can read off the command's
// text; a path built at run time (`d=/ref; cat $d/vllm/x.py`) is seen by neither. So the command runs under strace
// (outside the isolation, where the command can neither see nor touch the log; as the gates' audited runs do,
// gates/sandbox.h), and every path its processes name in a file system call is checked against the hidden paths.
//
// strace -f -qq -y --seccomp-bpf -e trace=%file,fchdir,exit_group -e signal=none: -y prints the directory a relative
// path was resolved against (AT_FDCWD</cwd>, 3</dir>), as the traced process sees it, so no working directory has to
// be tracked. Only the processes the command started are judged: the isolation's own set-up (bubblewrap's mounts,
// the fallback's script) is told apart by a random tag in the command shell's argv.
//
// Which accesses count (reached_hidden_paths):
//   - any path below a hidden directory: its cover is empty, so nothing below it is there to be found by a walk;
//     the command named it (by a path it built, a symlink it made, a directory descriptor it opened);
//   - a hidden file itself, opened or executed (not merely stat'ed), unless it was reached by a walk (a bare name
//     relative to a directory descriptor: grep -r, find) or a wildcard of the command could have expanded to it
//     (`grep x *` at the top of the run directory opens metrics.json);
//   - the target of a symlink the command creates, at or below a hidden path.
// A hidden directory itself (listed, entered) does not count: its cover shows nothing, and walkers list it.
//
// The gates run agent-written code under the same audit (gate_watch.h judge_gate_accesses): a script gate's shell is
// tagged like an agent's command; the engine gate's verifier runs with no shell around it, so its own execve (the
// first of the verifier's binary after the isolation's set-up: program_audit_tag) is what tells the isolation's
// processes from the ones that count, the verifier and everything it starts (the compiler, the stage tests).
//
// Not seen: file operations submitted through io_uring, and a symlink the command makes and removes before it ends
// that leads into a hidden path by a name the audit reads lexically. The mounts hide the paths either way.
#pragma once
#include <filesystem>
#include <istream>
#include <string>
#include <utility>
#include <vector>

namespace mi::agents {

// Where audited_accesses re-roots a path that goes on past an open descriptor's link (/proc/self/fd/N/x,
// /dev/fd/N/.., /dev/stdin/x), whose target the log does not show; classify_hidden_paths always adds it as a hidden
// directory, so such an access always counts. (/proc/self/root, /proc/self/cwd and the merged-/usr links are followed,
// component by component, as the kernel does, ".." after a link included.)
inline constexpr const char* kUnresolvedDescriptor = "/proc/self/fd/.mi-unresolved-descriptor";

struct FileAccess {
  std::string call;             // the system call; "symlink-target" for where a new symlink leads
  std::filesystem::path path;   // absolute, lexically normal, as the command's processes saw the file system
  bool walk = false;            // a bare name relative to a directory descriptor (a directory walk)
  bool stat_only = false;       // metadata only (stat, access, readlink): no content, no listing
  bool by_tagged = false;       // made by the tagged process itself (the command's shell, a program's own process),
                                // before it executed anything else; not by a process it started
};

// Whether strace can audit commands here (probed once). METAINFER_AGENT_AUDIT=off says no (tests of the fallback to
// the naming check; measurements of the overhead).
bool command_audit_available();

// The strace arguments that run a command under the audit, its log written to `log`.
std::vector<std::string> command_audit_prefix(const std::filesystem::path& log);

// The file accesses in an strace log made with command_audit_prefix, of the process whose execve carries `tag` (from
// that execve on) and of every process that appeared after it, except those that appeared before (the isolation's).
// `cwd`: where a relative path of a call without a directory argument is resolved when the process's working
// directory was not seen yet. `root_prefix`: a host directory the processes were chrooted into (the unshare fallback's
// new root), stripped from the directories strace resolves; empty for none.
// `only_within`: when given, only the accesses at or below one of these paths are kept (a build names hundreds of
// thousands of paths; the hidden ones are what the audit is for).
std::vector<FileAccess> audited_accesses(std::istream& log, const std::string& tag, const std::filesystem::path& cwd,
                                         const std::filesystem::path& root_prefix = {},
                                         const std::vector<std::filesystem::path>* only_within = nullptr);

struct HiddenPath {
  std::filesystem::path path;  // canonical, as commands see it
  bool directory = false;
  std::string rule;            // the violation rule an access counts under
  std::string shown;           // how messages name it
};

// How a violation names a hidden path: relative to the run directory when inside it, else absolute.
std::string violation_path(const HiddenPath& hidden, const std::filesystem::path& run_dir);

struct ReachedHiddenPath {
  std::size_t hidden = 0;               // index into the hidden paths
  std::vector<FileAccess> accesses;     // the accesses that count (the first few)
};

// The rule each of `hidden` (every path hidden from a command or gate: CommandResult::hidden) counts under, and how
// messages name it: `references` (canonical) -> reference_path; `foreign` (path, why: a file carrying a foreign
// signature) -> foreign_signature; a record of `run_dir` (protected_files.h) -> workflow_record; anything else
// (foreign sources installed on the system, system_references.h) -> reference_path.
std::vector<HiddenPath> classify_hidden_paths(const std::vector<std::filesystem::path>& hidden, const std::filesystem::path& run_dir,
                                              const std::vector<std::filesystem::path>& references,
                                              const std::vector<std::pair<std::filesystem::path, std::string>>& foreign);

// "open /ref/vllm/x.py, stat ..." for a reached hidden path's accesses.
std::string describe_accesses(const std::vector<FileAccess>& accesses);

// The tag audited_accesses keys on for a program started with no shell around it (isolated_command.h `program`): the
// start of its own execve's arguments as strace prints them, `("/path/to/program", [`. A set-up process's execve
// (bubblewrap's: its filename is bwrap) never starts so, and inside a string strace escapes every '"'. Empty when the
// path holds a character strace would escape otherwise (no tag: the run is not audited).
std::string program_audit_tag(const std::filesystem::path& program);

// The hidden paths `command` (run in `cwd`) reached for by the accesses above (rules above), in the order of `hidden`.
std::vector<ReachedHiddenPath> reached_hidden_paths(const std::vector<FileAccess>& accesses, const std::vector<HiddenPath>& hidden,
                                                    const std::string& command, const std::filesystem::path& cwd);

}  // namespace mi::agents
