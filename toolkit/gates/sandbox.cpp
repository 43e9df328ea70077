#include "gates/sandbox.h"

#include <stdlib.h>

#include <cctype>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "agents/system_references.h"
#include "common/error.h"
#include "generator/manifest.h"
#include "process/strace_line.h"

namespace mi::gates {
namespace fs = std::filesystem;

namespace {

bool tool_works(const std::vector<std::string>& argv) {
  const process::RunResult r = process::run(argv, {.timeout_s = 30, .merge_stderr = true});
  return r.exit_code == 0;
}

// bubblewrap arguments that show the engine only /usr (read-only, `hidden` covered), a private /proc, /dev and /tmp,
// and `root` at `inside` (read-only, with its out/ writable).
std::vector<std::string> bwrap_prefix(const fs::path& root, const std::string& inside, const std::vector<fs::path>& hidden = {}) {
  std::vector<std::string> a = {"bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink",
                                "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"};
  agents::append_bwrap_hides(a, hidden);
  if (fs::exists("/etc/ld.so.cache")) a.insert(a.end(), {"--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", root.string(), inside,
                     "--bind", (root / "out").string(), inside + "/out", "--unshare-all", "--die-with-parent",
                     "--new-session", "--chdir", inside, "--clearenv", "--setenv", "PATH", "/usr/bin"});
  return a;
}

bool bwrap_available() {
  static const bool ok = [] {
    char tmpl[] = "/tmp/mi-bwrap-probe-XXXXXX";
    if (!mkdtemp(tmpl)) return false;
    fs::create_directories(fs::path(tmpl) / "out");
    std::vector<std::string> argv = bwrap_prefix(tmpl, "/probe");
    argv.push_back("/usr/bin/true");
    const bool works = tool_works(argv);
    fs::remove_all(tmpl);
    return works;
  }();
  return ok;
}

bool strace_available() {
  static const bool ok = tool_works({"strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=%file,execve", "-o", "/dev/null", "/usr/bin/true"});
  return ok;
}

constexpr const char* kTime = "/usr/bin/time";  // GNU time: the engine's own wait4 rusage (-f %M: peak RSS in KiB)

// Whether a path the engine named (resolved against its working directory `cwd`) is inside `root` or one of the
// few system files a C++ program reads. /proc and /dev are allowed only file by file: /proc/self/cwd/.. or
// /dev/fd/N would lead anywhere.
bool allowed_path(const std::string& named, const std::string& cwd, const std::string& root, const std::vector<fs::path>& hidden) {
  if (named.empty()) return true;  // AT_EMPTY_PATH: the descriptor itself
  const std::string p = (named[0] == '/' ? fs::path(named) : fs::path(cwd) / named).lexically_normal().string();
  if ((p == root || p.rfind(root + "/", 0) == 0)) return true;
  for (const auto& h : hidden)
    if (p == h.string() || p.rfind(h.string() + "/", 0) == 0) return false;
  for (const char* prefix : {"/usr/", "/lib/", "/lib64/", "/sys/devices/system/cpu/"})
    if (p.rfind(prefix, 0) == 0) return true;
  for (const char* file : {"/etc/ld.so.cache", "/etc/ld.so.preload", "/dev/null", "/dev/zero", "/dev/urandom",
                           "/dev/random", "/proc/self/maps", "/proc/self/status", "/proc/meminfo", "/proc/cpuinfo",
                           "/proc/stat", "/proc/self/exe", "/sys/devices/system/cpu"})
    if (p == file) return true;
  return false;
}

// The paths named by file system calls of the engine - the process that executed the binary, and every process or
// thread it started - (strace -f output: "PID call(args) = result"), and the problems: a path outside the sandbox,
// a link created, a path relative to a directory descriptor the audit cannot resolve. Lines of other processes
// (bubblewrap's own, GNU time's) are not the engine's.
std::vector<std::string> outside_accesses(const std::string& log, const std::string& binary_inside, const std::string& cwd,
                                          const std::string& root, const std::vector<fs::path>& hidden) {
  std::vector<std::string> outside;
  std::set<long> engine;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const std::optional<process::StraceLine> parsed = process::parse_strace_line(line);
    if (!parsed) continue;
    const long pid = parsed->pid;
    const std::string rest(parsed->rest);
    if (!engine.count(pid)) {
      if (rest.rfind("execve(\"" + binary_inside + "\"", 0) == 0) engine.insert(pid);
      continue;
    }
    // A call interrupted by another thread's line ends later in "<... clone3 resumed> ... = CHILD".
    const bool resumed = rest.rfind("<... ", 0) == 0;
    const auto open = resumed ? rest.find(" resumed>") : rest.find('(');
    if (open == std::string::npos) continue;
    const std::string call = resumed ? rest.substr(5, open - 5) : rest.substr(0, open);
    if (call == "clone" || call == "clone3" || call == "fork" || call == "vfork") {  // "... = CHILD"
      const auto eq = rest.rfind("= ");
      if (eq != std::string::npos) {
        try {
          engine.insert(std::stol(rest.substr(eq + 2)));
        } catch (const std::exception&) {
        }
      }
      continue;
    }
    if (resumed) continue;  // the path, if any, was on the call's first line
    if (call.find("link") != std::string::npos && call.find("unlink") == std::string::npos && call != "readlink" &&
        call != "readlinkat") {
      outside.push_back("created a link: " + rest.substr(0, 200));
      continue;
    }
    const auto q = rest.find('"', open);
    if (q == std::string::npos) continue;
    const auto end = rest.find('"', q + 1);
    if (end == std::string::npos) continue;
    const std::string path = rest.substr(q + 1, end - q - 1);
    const std::string before = rest.substr(open + 1, q - open - 1);  // "" or "AT_FDCWD, " or "3, "
    if (!path.empty() && path[0] != '/' && !before.empty() && before.find("AT_FDCWD") == std::string::npos) {
      outside.push_back("a path relative to a directory descriptor: " + rest.substr(0, 200));
      continue;
    }
    if (!allowed_path(path, cwd, root, hidden)) outside.push_back(path);
  }
  return outside;
}

}  // namespace

std::string random_name() {
  static std::random_device device;
  static std::mt19937_64 rng((uint64_t(device()) << 32) ^ device());
  static const char* hex = "0123456789abcdef";
  std::string s;
  uint64_t x = rng();
  for (int i = 0; i < 16; ++i, x >>= 4) s += hex[x & 15];
  return s;
}

std::vector<fs::path> Sandbox::default_hidden() { return agents::host_system_reference_trees(); }

Sandbox::Sandbox(const fs::path& binary, const std::string& expected_sha256, Mode mode, std::vector<fs::path> hidden)
    : hidden_(std::move(hidden)) {
  char tmpl[] = "/tmp/mi-XXXXXX";
  if (!mkdtemp(tmpl)) fail("sandbox: cannot create a temporary directory");
  root_ = tmpl;
  fs::create_directories(root_ / "out");
  binary_name_ = random_name();
  fs::copy_file(binary, root_ / binary_name_);
  fs::permissions(root_ / binary_name_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  const std::string sha = generator::sha256_file(root_ / binary_name_);
  if (sha != expected_sha256)
    fail(binary.string(), ": sha256 ", sha, " is not the ", expected_sha256,
         " B0 built (the binary was replaced after the build)");
  bwrap_ = bwrap_available();
  audit_ = mode == Mode::audited && strace_available();
  inside_root_ = bwrap_ ? "/" + random_name() : root_.string();
  // Without namespaces the engine (often root) could read the answers and rewrite the copies the oracle reads, and
  // an strace audit alone can be evaded (vfork children, io_uring): acceptance needs bubblewrap.
  if (mode == Mode::audited && !bwrap_) {
    fs::remove_all(root_);
    fail("sandbox: bubblewrap does not run here, so the engine under test could read the answers and change what it is "
         "compared with; install it (apt-get install bubblewrap; ./setup.sh does) and allow user namespaces");
  }
}

Sandbox::~Sandbox() {
  std::error_code ec;
  fs::remove_all(root_, ec);
  fs::remove_all(root_.string() + ".audit", ec);
}

std::string Sandbox::inside(const fs::path& host) const {
  return inside_root_ + "/" + fs::relative(host, root_).generic_string();
}

fs::path Sandbox::host_path(const std::string& engine_path) const {
  if (engine_path.rfind(inside_root_ + "/", 0) != 0) fail("sandbox: ", engine_path, " is not a sandbox path");
  return root_ / engine_path.substr(inside_root_.size() + 1);
}

std::string Sandbox::add_checkpoint(const fs::path& checkpoint) {
  const fs::path dir = root_ / random_name();
  fs::create_directories(dir);
  int weights = 0;
  for (const auto& e : fs::directory_iterator(checkpoint)) {
    const std::string name = e.path().filename().string();
    const bool is_weights = name == "model.safetensors.index.json" ||
                            (name.rfind("model", 0) == 0 && e.path().extension() == ".safetensors");
    if (name == "config.json" || is_weights) {
      fs::copy_file(e.path(), dir / name);
      weights += is_weights;
    }
  }
  if (!fs::exists(dir / "config.json") || weights == 0)
    fail(checkpoint.string(), ": no config.json or no model*.safetensors to copy into the sandbox");
  return inside(dir);
}

std::string Sandbox::out_path(const std::string& name) const { return inside(root_ / "out" / name); }
fs::path Sandbox::host_out_path(const std::string& name) const { return root_ / "out" / name; }

SandboxRun Sandbox::run(const std::vector<std::string>& args, double timeout_s) const {
  const std::string binary_inside = inside(root_ / binary_name_);
  const int n = runs_++;
  std::vector<std::string> argv;
  const fs::path log = fs::path(root_.string() + ".audit") / ("run-" + std::to_string(n) + ".log");
  if (audit_) {
    fs::create_directories(log.parent_path());
    argv = {"strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=%file,%process", "-o", log.string()};
  }
  if (bwrap_) {
    const auto prefix = bwrap_prefix(root_, inside_root_, hidden_);
    argv.insert(argv.end(), prefix.begin(), prefix.end());
  }
  // GNU time reports on stderr after the engine has exited, so its line is the last one there; a random tag keeps an
  // engine from passing off a line of its own (a file in out/ could be replaced by the engine).
  const bool time_rss = fs::exists(kTime);
  const std::string rss_tag = "mi-peak-rss-" + random_name() + ":";
  if (time_rss) argv.insert(argv.end(), {kTime, "-f", rss_tag + "%M"});
  argv.push_back(binary_inside);
  argv.insert(argv.end(), args.begin(), args.end());
  SandboxRun run;
  run.result = process::run(argv, {.cwd = root_, .env = {{"PATH", "/usr/bin:/bin"}}, .clear_env = true,
                                   .timeout_s = timeout_s});
  run.result.peak_rss_kb = 0;  // the gate runner's own high-water mark would leak into wait4's; /usr/bin/time's is the engine's
  if (time_rss) {
    const auto at = run.result.err.rfind(rss_tag);
    if (at != std::string::npos && run.result.err.find('\n', at) >= run.result.err.size() - 1) {
      try {
        run.result.peak_rss_kb = std::stol(run.result.err.substr(at + rss_tag.size()));
      } catch (const std::exception&) {
      }
      run.result.err.erase(at);
    }
  }
  if (audit_) {
    std::set<std::string> outside;
    for (const auto& p : outside_accesses(generator::read_file(log), binary_inside, inside_root_, inside_root_, hidden_))
      outside.insert(p);
    run.outside_paths.assign(outside.begin(), outside.end());
  }
  return run;
}

std::string Sandbox::isolation() const {
  std::string s = bwrap_ ? "bubblewrap: own mount/pid/net namespaces; the engine sees only a random-named copy "
                           "directory (read-only, at a random path; out/ writable) and /usr (installed reference trees hidden)"
                         : "no bubblewrap (timing runs only): random-named copy directory as working directory, empty environment";
  s += audit_ ? "; strace audit of the paths the engine named (a second line of defence)" : "; no file-access audit";
  return s;
}

}  // namespace mi::gates
