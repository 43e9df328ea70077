#include "agents/isolated_command.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>

#include <stdlib.h>

#include "agents/protected_files.h"
#include "agents/system_references.h"
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
  // --cap-drop ALL: run by root, bubblewrap would otherwise leave the command every capability but CAP_SYS_ADMIN
  // inside its user namespace, CAP_SYS_PTRACE among them (enough to open the verifier's stdout through /proc and
  // write a report of its own there).
  std::vector<std::string> argv = {"bwrap", "--die-with-parent", "--unshare-all", "--new-session", "--cap-drop", "ALL"};
  add_system_mounts(argv);
  for (const auto& d : readonly_dirs) argv.insert(argv.end(), {"--ro-bind", d.string(), d.string()});
  argv.insert(argv.end(), {"--bind", run_dir.string(), run_dir.string(), "--chdir", run_dir.string(),
                           "--setenv", "HOME", "/tmp"});
  for (const auto& o : overlays)
    if (std::error_code ec; fs::exists(o, ec)) argv.insert(argv.end(), {"--ro-bind", o.string(), o.string()});
  // Last, so they cover whatever mount above exposed them.
  append_bwrap_hides(argv, hidden);
  return argv;
}

// The fallback: `unshare -n -m -p --fork` (with -r unprivileged) runs kRootScript as PID 1 of a new PID namespace in
// a private mount namespace. The script builds a new root on a tmpfs mounted at ROOT (an empty directory the caller
// made), holding what bubblewrap's sandbox holds and nothing else: the system's /usr, /etc, /bin, /lib... read-only,
// a few /dev nodes, a fresh /proc of the new PID namespace (no host process is visible, so /proc/PID/root cannot lead
// back to the host's mounts), a private /tmp, the run directory writable, the --readonly paths read-only, the
// --overlay paths (inside the run directory) read-only over it and the --hide paths covered (a directory by an empty
// tmpfs with mode 000, a file by /dev/null). Then it chroots there and setpriv drops every capability (bounding set
// included, no_new_privs) before the shell starts (SHELL_COMMAND changes to the run directory first: chroot leaves
// it at /), so nothing the command runs can undo a mount or leave the chroot. Any mount that fails ends the script
// with status 125 before the command runs.
// Arguments: ROOT RUN_DIR --readonly PATH... --overlay PATH... --hide PATH... -- SHELL_COMMAND.
constexpr const char* kRootScript = R"SH(fail() { echo "isolation: $1; the command was not run" >&2; exit 125; }
R=$1; run_dir=$2; shift 2
mount -t tmpfs -o mode=755 mi-root "$R" || fail "cannot mount the new root at $R"
bind_ro() {  # SOURCE TARGET (the target is created only when missing: an overlay's target is the file itself)
  if [ ! -e "$2" ] && [ ! -L "$2" ]; then
    if [ -d "$1" ]; then mkdir -p "$2"; else mkdir -p "$(dirname "$2")" && : > "$2"; fi || fail "cannot create $2"
  fi
  mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" || fail "cannot mount $1 read-only"
}
for d in /usr /etc /bin /sbin /lib /lib32 /lib64; do
  if [ -L "$d" ]; then ln -s "$(readlink "$d")" "$R$d" || fail "cannot link $d"
  elif [ -d "$d" ]; then bind_ro "$d" "$R$d"; fi
done
mkdir -p "$R/dev" "$R/proc" "$R/tmp" || fail "cannot create the system directories"
for n in null zero full random urandom tty; do
  [ -e "/dev/$n" ] || continue
  : > "$R/dev/$n" && mount --bind "/dev/$n" "$R/dev/$n" || fail "cannot bind /dev/$n"
done
ln -s /proc/self/fd "$R/dev/fd" && ln -s /proc/self/fd/0 "$R/dev/stdin" && ln -s /proc/self/fd/1 "$R/dev/stdout" &&
  ln -s /proc/self/fd/2 "$R/dev/stderr" || fail "cannot create /dev/fd"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc" || fail "cannot mount /proc for the new PID namespace"
# The kernel's knobs stay read-only: a uid-0 command without capabilities still passes /proc/sys's owner bits
# (kernel.core_pattern would run a program as host root), and sysrq-trigger reboots the host.
for k in sys sysrq-trigger irq bus; do
  [ -e "$R/proc/$k" ] || continue
  mount --bind "$R/proc/$k" "$R/proc/$k" && mount -o remount,bind,ro "$R/proc/$k" || fail "cannot make /proc/$k read-only"
done
mount -t tmpfs -o mode=1777 mi-tmp "$R/tmp" || fail "cannot mount a private /tmp"
mkdir -p "$R$run_dir" && mount --bind "$run_dir" "$R$run_dir" || fail "cannot mount the run directory"
mode=
while [ $# -gt 0 ]; do
  p=$1; shift
  case $p in
    --readonly|--overlay|--hide) mode=$p; continue ;;
    --) break ;;
  esac
  case $mode in
    --readonly) [ -e "$p" ] && bind_ro "$p" "$R$p" ;;
    --overlay) [ -e "$R$p" ] && bind_ro "$R$p" "$R$p" ;;
    --hide)
      [ -e "$R$p" ] || continue
      if [ -d "$R$p" ]; then mount -t tmpfs -o ro,mode=000,size=4k mi-hidden "$R$p"; else mount --bind /dev/null "$R$p"; fi ||
        fail "cannot cover $p" ;;
  esac
done
chroot_bin=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v chroot) || fail "no chroot program"
exec "$chroot_bin" "$R" /usr/bin/setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- /bin/bash -c "$1")SH";

struct FallbackMounts {
  std::vector<fs::path> readonly, overlays, hidden;
};

std::vector<std::string> fallback_prefix(bool unprivileged, const fs::path& root, const fs::path& run_dir,
                                         const FallbackMounts& m, const std::string& shell) {
  std::vector<std::string> argv = {"unshare"};
  if (unprivileged) argv.push_back("-r");
  argv.insert(argv.end(), {"-n", "-m", "-p", "-i", "-u", "--fork", "--propagation", "private", "/bin/bash", "-c", kRootScript, "mi-isolation",
                           root.string(), run_dir.string()});
  for (const auto& [flag, list] : {std::pair{"--readonly", &m.readonly}, {"--overlay", &m.overlays}, {"--hide", &m.hidden}}) {
    argv.push_back(flag);
    for (const auto& p : *list) argv.push_back(p.string());
  }
  argv.insert(argv.end(), {"--", shell});
  return argv;
}

// An empty directory on the host where the fallback mounts its new root (inside its own mount namespace: the host's
// directory stays empty), removed when the command is done.
struct RootMountPoint {
  fs::path path;
  RootMountPoint() {
    std::string tmpl = (fs::temp_directory_path() / "metainfer-root-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fail("run_command: cannot create a directory for the isolated root");
    path = tmpl;
  }
  ~RootMountPoint() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// A host directory for the audit's log, out of every command's sight (commands get a private /tmp), removed after.
struct AuditDir {
  fs::path path;
  AuditDir() {
    std::string tmpl = (fs::temp_directory_path() / "metainfer-audit-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) fail("run_command: cannot create a directory for the audit log");
    path = tmpl;
  }
  ~AuditDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A random tag for the command shell's argv, which tells the command's processes from the isolation's in the audit.
std::string audit_tag() {
  static std::random_device device;
  static std::mt19937_64 rng((std::uint64_t(device()) << 32) ^ device());
  static const char* hex = "0123456789abcdef";
  std::string s = "mi-audit-";
  std::uint64_t x = rng();
  for (int i = 0; i < 16; ++i, x >>= 4) s += hex[x & 15];
  return s;
}

std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Isolation probe_bubblewrap() {
  std::vector<std::string> probe = bwrap_prefix("/tmp", {});
  probe.push_back("true");
  if (works(probe)) return {IsolationKind::bubblewrap, "bubblewrap: no network, run directory + read-only system and CKB only", true};
  return {IsolationKind::none, "none available (bubblewrap does not run here)", false};
}

// `unshare -n` alone: no network, and nothing else (no mount or PID namespace, so nothing can be hidden).
Isolation probe_plain_unshare() {
  if (works({"unshare", "-n", "true"})) return {IsolationKind::unshare_net, "unshare -n: no network; file system NOT confined for commands", false};
  if (works({"unshare", "-rn", "true"})) return {IsolationKind::unshare_net, "unshare -rn: no network; file system NOT confined for commands", false};
  return {IsolationKind::none, "none available", false};
}

Isolation probe_unshare() {
  // The whole fallback must work: the new root, the PID namespace, hiding a directory and a file, a command in it.
  const RootMountPoint root;
  const fs::path tmp = fs::temp_directory_path();
  for (const bool unprivileged : {false, true})
    if (works(fallback_prefix(unprivileged, root.path, tmp, {{"/usr"}, {}, {"/usr/share", "/etc/hostname"}}, "test -d /proc/self")))
      return {IsolationKind::unshare_net,
              std::string(unprivileged ? "unshare -r -n -m -p -i -u" : "unshare -n -m -p -i -u") +
                  ": no network, own PID namespace, a new root holding only the system's read-only /usr and /etc, a "
                  "private /tmp, the run directory and the read-only CKB; reference trees hidden, capabilities dropped",
              true};
  return probe_plain_unshare();
}

}  // namespace

const Isolation& command_isolation() {
  static const Isolation bubblewrap = probe_bubblewrap();
  const char* forced = std::getenv("METAINFER_AGENT_ISOLATION");
  const std::string choice = forced ? forced : "";
  if (choice == "bubblewrap") return bubblewrap;
  if (choice == "unshare-net") {  // the weakest isolation, to test that whatever must be confined refuses it
    static const Isolation plain = probe_plain_unshare();
    return plain;
  }
  if (choice != "unshare" && bubblewrap.kind == IsolationKind::bubblewrap) return bubblewrap;
  static const Isolation unshare = probe_unshare();
  return unshare;
}

void require_isolation_for(const Isolation& isolation, bool must_confine) {
  if (isolation.kind == IsolationKind::none || isolation.hides_paths || !must_confine) return;
  fail("run_command: refused: this command must not see the host's file system (the source switch is OFF, or "
       "reference trees or files carrying foreign signatures must be hidden), but only '", isolation.description,
       "' is available here: it removes the network, not the file system. Install bubblewrap (bwrap) and allow "
       "unprivileged user namespaces, or give unshare mount and PID namespaces (`unshare -Ur -m -p --fork true` must work)");
}

CommandResult run_isolated_command(const std::string& command, const fs::path& run_dir,
                                   const std::vector<fs::path>& readonly_dirs, double timeout_s,
                                   std::size_t max_output_bytes, const std::vector<fs::path>& hidden,
                                   const std::vector<fs::path>& readonly_overlays,
                                   const std::map<std::string, std::string>& extra_env, bool must_confine, bool audit,
                                   const std::vector<std::string>& program) {
  const Isolation& iso = command_isolation();
  if (iso.kind == IsolationKind::none)
    fail("run_command: refused, no way to run a command without network here (needs bubblewrap or `unshare -n`)");
  // Here, not in each caller, so that no path that runs agent-influenced code (agents' commands, script gates, the
  // engine gate's verifier) can forget it.
  require_isolation_for(iso, must_confine);
  // Foreign sources installed in the system directories the command sees are hidden from every command, whatever
  // the caller passed (system_references.h).
  std::vector<fs::path> hidden_paths = hidden;
  for (const auto& t : host_system_reference_trees())
    if (std::find(hidden_paths.begin(), hidden_paths.end(), t) == hidden_paths.end()) hidden_paths.push_back(t);
  // The workflow's records, where they exist (a missing one has nothing to hide, and a mount needs its target).
  for (const auto& r : hidden_record_paths(run_dir))
    if (std::error_code ec; fs::exists(fs::symlink_status(r, ec)) && std::find(hidden_paths.begin(), hidden_paths.end(), r) == hidden_paths.end())
      hidden_paths.push_back(r);
  if (!hidden_paths.empty() && !iso.hides_paths)
    fail("run_command: refused: paths must be hidden from this command (reference trees, the workflow's records), but '",
         iso.description, "' cannot hide them");
  // The command travels in the environment, so no quoting of it into a shell string is needed. pipefail: the
  // status is the command's, not tail's. One byte over the limit tells us the output was cut. The tag comes first,
  // where strace's shortened argv still shows it.
  // A trusted program's verdict must not pass through a shell the code it runs could reach (header): only bubblewrap
  // can start it as the sandbox's PID 1 with nothing around it.
  if (!program.empty() && iso.kind != IsolationKind::bubblewrap)
    fail("run_command: refused: '", program.front(), "' must run with no shell around it (its verdict would pass through "
         "one that the code it judges can rewrite), which needs bubblewrap; here only '", iso.description, "'");
  const std::string tag = audit_tag();
  const std::string body = "set -o pipefail; ( eval \"$MI_AGENT_COMMAND\" ) 2>&1 < /dev/null | tail -c " +
                           std::to_string(max_output_bytes + 1);
  const std::string shell = ": " + tag + "; " + body;
  std::vector<std::string> argv;
  std::optional<RootMountPoint> root;  // the fallback's: kept until the command is done
  if (iso.kind == IsolationKind::bubblewrap) {
    argv = bwrap_prefix(run_dir, readonly_dirs, hidden_paths, readonly_overlays);
    if (program.empty()) argv.insert(argv.end(), {"/bin/bash", "-c", shell});
    else {
      argv.push_back("--as-pid-1");
      argv.insert(argv.end(), program.begin(), program.end());
    }
  } else if (iso.hides_paths) {
    root.emplace();
    const std::string in_run_dir = ": " + tag + "; cd " + single_quoted(run_dir.string()) + " || exit 125; " + body;
    argv = fallback_prefix(iso.description.rfind("unshare -r ", 0) == 0, root->path, run_dir,
                           {readonly_dirs, readonly_overlays, hidden_paths}, in_run_dir);
  } else {
    argv = {"unshare", iso.description.rfind("unshare -rn", 0) == 0 ? "-rn" : "-n", "/bin/bash", "-c", shell};
  }
  // A program started with no shell around it carries no tag of ours: its own execve is the key (command_audit.h).
  const std::string keyed_by = program.empty() ? tag : program_audit_tag(program.front());
  std::optional<AuditDir> audit_dir;
  if (audit && !keyed_by.empty() && command_audit_available()) {
    audit_dir.emplace();
    std::vector<std::string> traced = command_audit_prefix(audit_dir->path / "strace.log");
    traced.insert(traced.end(), argv.begin(), argv.end());
    argv = std::move(traced);
  }
  process::RunOptions opts;
  opts.cwd = run_dir;
  opts.timeout_s = timeout_s;
  opts.merge_stderr = true;
  // A clean environment: the host's may hold API keys (OPENAI_API_KEY, ...) that an agent's command must not see.
  opts.clear_env = true;
  opts.env = {{"MI_AGENT_COMMAND", command}, {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"},
              {"HOME", iso.hides_paths ? "/tmp" : run_dir.string()}, {"CCACHE_DISABLE", "1"}};
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
  out.hidden = hidden_paths;
  if (audit_dir) {
    std::ifstream log(audit_dir->path / "strace.log");
    out.audited = true;
    out.accesses = audited_accesses(log, keyed_by, run_dir, root ? root->path : fs::path(), &hidden_paths);
  }
  if (out.output.size() > max_output_bytes) {
    out.truncated = true;
    out.output = out.output.substr(out.output.size() - max_output_bytes);
  }
  return out;
}

}  // namespace mi::agents
