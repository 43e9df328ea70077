// Shell commands for agents (builds, tests): run in the run directory, without network, with a wall-clock limit
// and a bounded output.
//
// With bubblewrap (Debian's bwrap; it works unprivileged where user namespaces are allowed) the command gets its own
// namespaces, network included, no capabilities (also when run by root), and sees only the system's read-only /usr and /etc, a private /tmp, the run
// directory (writable) and the read-only directories the caller names (the CKB). Reference trees are not mounted,
// so SWITCH=OFF holds for commands too; a reference tree that lies under a mounted directory (a Python package in
// /usr, say) is covered by an empty tmpfs (a file: by /dev/null). Foreign sources installed in the system
// directories (system_references.h) are covered so for every command, whatever the caller passes. readonly_overlays (protected files and directories
// inside the run directory) are bound again read-only over the writable run directory, so a command cannot rewrite
// a test contract either; what they cannot cover (a protected directory created later) the hash check catches.
//
// Without bubblewrap the fallback is `unshare -n -m -p --fork` (`unshare -r ...` unprivileged): no network, its own
// PID namespace (no host process is visible in its /proc, so /proc/PID/root cannot lead back to the host's mounts)
// and a private mount namespace in which a script builds a new root before the command runs: the system's /usr and
// /etc (and the /bin, /lib links) read-only, a few /dev nodes, /proc, a private /tmp, the run directory, the
// read-only directories, the overlays read-only, the hidden paths covered (an empty tmpfs with mode 000; a file:
// /dev/null). It chroots there and runs the command under `setpriv` with every capability dropped (bounding set
// included, no_new_privs), so it cannot unmount, remount or leave the root. A mount that fails stops the command
// before it runs. So the fallback confines the file system as bubblewrap does (chosen over refusing it: a machine
// without bubblewrap, or whose bubblewrap misbehaves, can still run the SWITCH=OFF regeneration, with the same view).
// Where that cannot be set up (plain `unshare -n` only: no mount or PID namespace), the fallback cannot hide
// anything and the whole host file system is readable: a command with hidden paths is refused, and
// require_isolation_for (called by run_isolated_command itself) refuses agents' commands (they always have the
// workflow's records to hide, under either switch) and the gates' commands (script gates, the engine gate's
// verifier) alike. With no isolation at all, commands are refused: running an agent's shell with network access is
// not an option.
//
// METAINFER_AGENT_ISOLATION=unshare skips bubblewrap and uses the fallback (tests of the fallback; hosts whose
// bubblewrap misbehaves); =bubblewrap uses bubblewrap or nothing; =unshare-net uses plain `unshare -n` (tests that
// every path refuses it where the file system must be confined).
//
// The environment is clean (PATH, HOME, LANG, CCACHE_DISABLE=1) plus extra_env, never the host's: it may hold API
// keys. extra_env may override those (the engine gate lets its build read the host's ccache, read-only).
//
// Output: stdout and stderr merged, only the last max_output_bytes kept (a build's error is at its end), via
// `tail -c` inside the sandbox so a runaway writer cannot fill our memory.
//
// The workflow's hidden records in run_dir (protected_files.h: transcripts/, .metainfer/, metrics.json, summary.md)
// are hidden from every command and gate like the system's foreign sources, whatever the caller passes: a transcript
// holds every tool result of every role (the explorer's reference reads under SWITCH=ON among them).
//
// With `audit`, the command runs under strace (command_audit.h; outside the isolation, so the command can neither see
// nor change the log) and the result carries every hidden path its processes named; without strace, `audited` is
// false. A `program` (below) is audited from its own execve on, itself and everything it starts: the isolation's
// set-up before it is not the command's.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "agents/command_audit.h"

namespace mi::agents {

enum class IsolationKind { bubblewrap, unshare_net, none };

struct Isolation {
  IsolationKind kind = IsolationKind::none;
  std::string description;
  // The command sees only the run directory, the system and the paths it is given, and hidden paths are out of its
  // reach (bubblewrap; unshare with its mount and PID namespaces)
  bool hides_paths = false;
};

// Probed once per process per kind (each probe runs `true` under the candidate, hiding a directory for the
// fallback); METAINFER_AGENT_ISOLATION chooses as above.
const Isolation& command_isolation();

// Throws mi::Error naming the missing isolation when the command must not see the host's file system (`must_confine`:
// the source switch is OFF, or reference trees or signature files must be hidden) and `isolation` does not confine
// it (plain `unshare -n`, which confines the network and not the file system).
void require_isolation_for(const Isolation& isolation, bool must_confine);

struct CommandResult {
  int exit_code = -1;
  bool timed_out = false;
  bool truncated = false;
  std::string output;
  double wall_s = 0;
  std::vector<std::filesystem::path> hidden;  // every path hidden from the command (the caller's, the system's, the records)
  bool audited = false;                       // audit asked for and strace available: `accesses` is what it saw
  std::vector<FileAccess> accesses;
};

// Throws mi::Error when no isolation works here, when anything must be hidden (hidden_paths, the system's foreign
// sources, the records in run_dir) and the isolation cannot hide it, or when `must_confine` and the isolation does
// not confine the file system (require_isolation_for). must_confine is true unless the caller knows the host's file
// system may be seen; no caller passes false any more: agents' commands always have the workflow's records to hide,
// and the gates run agent-written code without knowing the switch of the round.
CommandResult run_isolated_command(const std::string& command, const std::filesystem::path& run_dir,
                                   const std::vector<std::filesystem::path>& readonly_dirs, double timeout_s,
                                   std::size_t max_output_bytes,
                                   const std::vector<std::filesystem::path>& hidden_paths = {},
                                   const std::vector<std::filesystem::path>& readonly_overlays = {},
                                   const std::map<std::string, std::string>& extra_env = {}, bool must_confine = true,
                                   bool audit = false, const std::vector<std::string>& program = {});
// `program` (the engine gate's verifier, a binary the toolkit trusts; `command` must be the same command for the
// fallback): under bubblewrap it runs with no shell around it, as the PID namespace's init (--as-pid-1), its output
// going straight to this process and cut here. No dumpable process of the sandbox (a wrapper shell, tail, bubblewrap's
// reaper) then holds its output pipe or relays its exit status, which the agent-written code it runs could rewrite
// through ptrace or /proc/PID/mem as the same user (found by review: a stage test's static initializer forged a
// PASSED report and exit status 0 that way); the verifier itself is non-dumpable. Without bubblewrap a `program` is
// refused (the unshare fallback needs its shell).

}  // namespace mi::agents
