#include "agents/isolated_command.h"

#include "common/error.h"
#include "process/subprocess.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

bool works(const std::vector<std::string>& argv) {
  const process::RunResult r = process::run(argv, {.timeout_s = 20});
  return !r.timed_out && r.exit_code == 0;
}

// Root-level entries the system needs: bound read-only, or re-created as the same symlink (Debian's merged /usr
// makes /bin, /lib, ... symlinks into /usr).
void add_system_mounts(std::vector<std::string>& argv) {
  argv.insert(argv.end(), {"--ro-bind", "/usr", "/usr"});
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64"}) {
    std::error_code ec;
    if (fs::is_symlink(d, ec)) argv.insert(argv.end(), {"--symlink", fs::read_symlink(d).string(), d});
    else if (fs::is_directory(d, ec)) argv.insert(argv.end(), {"--ro-bind", d, d});
  }
  argv.insert(argv.end(), {"--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
}

std::vector<std::string> bwrap_prefix(const fs::path& run_dir, const std::vector<fs::path>& readonly_dirs,
                                      const std::vector<fs::path>& hidden = {}, const std::vector<fs::path>& overlays = {}) {
  std::vector<std::string> argv = {"bwrap", "--die-with-parent", "--unshare-all", "--new-session"};
  add_system_mounts(argv);
  for (const auto& d : readonly_dirs) argv.insert(argv.end(), {"--ro-bind", d.string(), d.string()});
  argv.insert(argv.end(), {"--bind", run_dir.string(), run_dir.string(), "--chdir", run_dir.string(),
                           "--setenv", "HOME", "/tmp"});
  for (const auto& o : overlays)
    if (std::error_code ec; fs::exists(o, ec)) argv.insert(argv.end(), {"--ro-bind", o.string(), o.string()});
  // Last, so they cover whatever mount above exposed them.
  for (const auto& h : hidden) {
    std::error_code ec;
    if (fs::is_directory(h, ec)) argv.insert(argv.end(), {"--tmpfs", h.string()});
    else if (fs::exists(h, ec)) argv.insert(argv.end(), {"--ro-bind", "/dev/null", h.string()});
  }
  return argv;
}

}  // namespace

const Isolation& command_isolation() {
  static const Isolation probed = [] {
    std::vector<std::string> probe = bwrap_prefix("/tmp", {});
    probe.push_back("true");
    if (works(probe)) return Isolation{IsolationKind::bubblewrap, "bubblewrap: no network, run directory + read-only system and CKB only"};
    if (works({"unshare", "-n", "true"})) return Isolation{IsolationKind::unshare_net, "unshare -n: no network; file system NOT confined for commands"};
    if (works({"unshare", "-rn", "true"})) return Isolation{IsolationKind::unshare_net, "unshare -rn: no network; file system NOT confined for commands"};
    return Isolation{IsolationKind::none, "none available"};
  }();
  return probed;
}

void require_isolation_for(const Isolation& isolation, SourceSwitch source_switch, bool references_configured) {
  if (isolation.kind != IsolationKind::unshare_net || source_switch != SourceSwitch::off || !references_configured) return;
  fail("run_command: refused: the source switch is off and reference trees are configured, but only '", isolation.description,
       "' is available here: it removes the network, not the file system, so a command could read the references. "
       "Install bubblewrap (bwrap) and allow unprivileged user namespaces, or run without --reference");
}

CommandResult run_isolated_command(const std::string& command, const fs::path& run_dir,
                                   const std::vector<fs::path>& readonly_dirs, double timeout_s,
                                   std::size_t max_output_bytes, const std::vector<fs::path>& hidden_paths,
                                   const std::vector<fs::path>& readonly_overlays,
                                   const std::map<std::string, std::string>& extra_env) {
  const Isolation& iso = command_isolation();
  std::vector<std::string> argv;
  switch (iso.kind) {
    case IsolationKind::bubblewrap:
      argv = bwrap_prefix(run_dir, readonly_dirs, hidden_paths, readonly_overlays);
      break;
    case IsolationKind::unshare_net:
      argv = {"unshare", iso.description.rfind("unshare -rn", 0) == 0 ? "-rn" : "-n"};
      break;
    case IsolationKind::none:
      fail("run_command: refused, no way to run a command without network here (needs bubblewrap or `unshare -n`)");
  }
  // The command travels in the environment, so no quoting of it into a shell string is needed. pipefail: the
  // status is the command's, not tail's. One byte over the limit tells us the output was cut.
  argv.insert(argv.end(), {"/bin/bash", "-c",
                           "set -o pipefail; ( eval \"$MI_AGENT_COMMAND\" ) 2>&1 < /dev/null | tail -c " +
                               std::to_string(max_output_bytes + 1)});
  process::RunOptions opts;
  opts.cwd = run_dir;
  opts.timeout_s = timeout_s;
  opts.merge_stderr = true;
  // A clean environment: the host's may hold API keys (OPENAI_API_KEY, ...) that an agent's command must not see.
  opts.clear_env = true;
  opts.env = {{"MI_AGENT_COMMAND", command}, {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"},
              {"HOME", iso.kind == IsolationKind::bubblewrap ? "/tmp" : run_dir.string()}, {"CCACHE_DISABLE", "1"}};
  for (const auto& [k, v] : extra_env) {
    if (v.empty()) opts.env.erase(k);  // "" removes a default (CCACHE_DISABLE for a build allowed to read the cache)
    else opts.env[k] = v;
  }
  const process::RunResult r = process::run(argv, opts);
  CommandResult out;
  out.exit_code = r.exit_code;
  out.timed_out = r.timed_out;
  out.wall_s = r.wall_s;
  out.output = r.out;
  if (out.output.size() > max_output_bytes) {
    out.truncated = true;
    out.output = out.output.substr(out.output.size() - max_output_bytes);
  }
  return out;
}

}  // namespace mi::agents
