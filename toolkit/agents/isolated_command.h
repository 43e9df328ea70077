// Shell commands for agents (builds, tests): run in the run directory, without network, with a wall-clock limit
// and a bounded output.
//
// With bubblewrap (Debian's bwrap; it works unprivileged where user namespaces are allowed) the command gets its own
// namespaces, network included, and sees only the system's read-only /usr and /etc, a private /tmp, the run
// directory (writable) and the read-only directories the caller names (the CKB). Reference trees are not mounted,
// so SWITCH=OFF holds for commands too; a reference tree that lies under a mounted directory (a Python package in
// /usr, say) is covered by an empty tmpfs (a file: by /dev/null). readonly_overlays (protected files and directories
// inside the run directory) are bound again read-only over the writable run directory, so a command cannot rewrite
// a test contract either; what they cannot cover (a protected directory created later) the hash check catches. Without bubblewrap, `unshare -n` (or `unshare -rn` unprivileged) still
// removes the network, but the file system is then the host's: the isolation string says so and the metrics record
// it. That is not enough for SWITCH=OFF with reference trees configured (a command could read them): then
// require_isolation_for refuses, and the sandbox runs no command. With neither, commands are refused: running an
// agent's shell with network access is not an option.
//
// The environment is clean (PATH, HOME, LANG, CCACHE_DISABLE=1) plus extra_env, never the host's: it may hold API
// keys. extra_env may override those (the engine gate lets its build read the host's ccache, read-only).
//
// Output: stdout and stderr merged, only the last max_output_bytes kept (a build's error is at its end), via
// `tail -c` inside the sandbox so a runaway writer cannot fill our memory.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "agents/source_switch.h"

namespace mi::agents {

enum class IsolationKind { bubblewrap, unshare_net, none };

struct Isolation {
  IsolationKind kind = IsolationKind::none;
  std::string description;
};

// Probed once per process (each probe runs `true` under the candidate).
const Isolation& command_isolation();

// Throws mi::Error naming the missing isolation when `isolation` cannot keep agents' commands away from the reference
// trees: the switch is off, reference paths are configured, and there is no bubblewrap (only `unshare -n`, which
// confines the network and not the file system).
void require_isolation_for(const Isolation& isolation, SourceSwitch source_switch, bool references_configured);

struct CommandResult {
  int exit_code = -1;
  bool timed_out = false;
  bool truncated = false;
  std::string output;
  double wall_s = 0;
};

// Throws mi::Error when no isolation works here.
CommandResult run_isolated_command(const std::string& command, const std::filesystem::path& run_dir,
                                   const std::vector<std::filesystem::path>& readonly_dirs, double timeout_s,
                                   std::size_t max_output_bytes,
                                   const std::vector<std::filesystem::path>& hidden_paths = {},
                                   const std::vector<std::filesystem::path>& readonly_overlays = {},
                                   const std::map<std::string, std::string>& extra_env = {});

}  // namespace mi::agents
