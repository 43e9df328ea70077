#include "agents/isolated_command.h"

#include <cstdlib>

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

// The fallback's mount namespace: argv of `unshare` for it, and the script that runs first inside it. Its arguments
// are "--readonly" PATH... "--hide" PATH... "--" then the shell command; each PATH that exists is mounted over,
// and a mount that fails ends the script with status 125 before the command runs. setpriv drops every capability
// for the command, so nothing it runs can undo the mounts (and a user namespace it might create gets them locked).
constexpr const char* kHideScript = R"(mode=
while [ $# -gt 0 ]; do
  p=$1; shift
  case $p in
    --readonly|--hide) mode=$p; continue ;;
    --) break ;;
  esac
  [ -e "$p" ] || continue
  if [ "$mode" = --hide ]; then
    if [ -d "$p" ]; then mount -t tmpfs -o ro,mode=000,size=4k mi-hidden "$p"; else mount --bind /dev/null "$p"; fi
  else
    mount --bind "$p" "$p" && mount -o remount,bind,ro "$p"
  fi || { echo "isolation: cannot cover $p; the command was not run" >&2; exit 125; }
done
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- /bin/bash -c "$1")";

std::vector<std::string> fallback_prefix(bool unprivileged, const std::vector<fs::path>& readonly,
                                         const std::vector<fs::path>& hidden, const std::string& shell) {
  std::vector<std::string> argv = {"unshare"};
  if (unprivileged) argv.push_back("-r");
  argv.insert(argv.end(), {"-n", "-m", "--propagation", "private", "/bin/bash", "-c", kHideScript, "mi-isolation", "--readonly"});
  for (const auto& p : readonly) argv.push_back(p.string());
  argv.push_back("--hide");
  for (const auto& p : hidden) argv.push_back(p.string());
  argv.insert(argv.end(), {"--", shell});
  return argv;
}

Isolation probe_bubblewrap() {
  std::vector<std::string> probe = bwrap_prefix("/tmp", {});
  probe.push_back("true");
  if (works(probe)) return {IsolationKind::bubblewrap, "bubblewrap: no network, run directory + read-only system and CKB only", true};
  return {IsolationKind::none, "none available (bubblewrap does not run here)", false};
}

Isolation probe_unshare() {
  // The mount namespace must work, hiding included: a directory is covered in the probe.
  for (const bool unprivileged : {false, true})
    if (works(fallback_prefix(unprivileged, {"/usr"}, {"/tmp"}, "true")))
      return {IsolationKind::unshare_net,
              std::string(unprivileged ? "unshare -r -n -m" : "unshare -n -m") +
                  ": no network; reference trees hidden and the CKB read-only in a private mount namespace, capabilities "
                  "dropped; the rest of the file system NOT confined for commands",
              true};
  if (works({"unshare", "-n", "true"})) return {IsolationKind::unshare_net, "unshare -n: no network; file system NOT confined for commands", false};
  if (works({"unshare", "-rn", "true"})) return {IsolationKind::unshare_net, "unshare -rn: no network; file system NOT confined for commands", false};
  return {IsolationKind::none, "none available", false};
}

}  // namespace

const Isolation& command_isolation() {
  static const Isolation bubblewrap = probe_bubblewrap();
  const char* forced = std::getenv("METAINFER_AGENT_ISOLATION");
  const std::string choice = forced ? forced : "";
  if (choice == "bubblewrap") return bubblewrap;
  if (choice != "unshare" && bubblewrap.kind == IsolationKind::bubblewrap) return bubblewrap;
  static const Isolation unshare = probe_unshare();
  return unshare;
}

void require_isolation_for(const Isolation& isolation, bool references_configured) {
  if (isolation.kind == IsolationKind::none || isolation.hides_paths || !references_configured) return;
  fail("run_command: refused: reference trees are configured, but only '", isolation.description,
       "' is available here: it removes the network, not the file system, so a command could read the references. "
       "Install bubblewrap (bwrap) and allow unprivileged user namespaces (or give unshare a mount namespace and "
       "setpriv), or run without --reference");
}

CommandResult run_isolated_command(const std::string& command, const fs::path& run_dir,
                                   const std::vector<fs::path>& readonly_dirs, double timeout_s,
                                   std::size_t max_output_bytes, const std::vector<fs::path>& hidden_paths,
                                   const std::vector<fs::path>& readonly_overlays,
                                   const std::map<std::string, std::string>& extra_env) {
  const Isolation& iso = command_isolation();
  if (iso.kind == IsolationKind::none)
    fail("run_command: refused, no way to run a command without network here (needs bubblewrap or `unshare -n`)");
  if (!hidden_paths.empty() && !iso.hides_paths)
    fail("run_command: refused: paths must be hidden from this command (reference trees), but '", iso.description,
         "' cannot hide them");
  // The command travels in the environment, so no quoting of it into a shell string is needed. pipefail: the
  // status is the command's, not tail's. One byte over the limit tells us the output was cut.
  const std::string shell = "set -o pipefail; ( eval \"$MI_AGENT_COMMAND\" ) 2>&1 < /dev/null | tail -c " +
                            std::to_string(max_output_bytes + 1);
  std::vector<std::string> argv;
  if (iso.kind == IsolationKind::bubblewrap) {
    argv = bwrap_prefix(run_dir, readonly_dirs, hidden_paths, readonly_overlays);
    argv.insert(argv.end(), {"/bin/bash", "-c", shell});
  } else if (iso.hides_paths) {
    std::vector<fs::path> readonly = readonly_dirs;
    readonly.insert(readonly.end(), readonly_overlays.begin(), readonly_overlays.end());
    argv = fallback_prefix(iso.description.rfind("unshare -r ", 0) == 0, readonly, hidden_paths, shell);
  } else {
    argv = {"unshare", iso.description.rfind("unshare -rn", 0) == 0 ? "-rn" : "-n", "/bin/bash", "-c", shell};
  }
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
