#include "gates/sandbox.h"

#include <stdlib.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "generator/manifest.h"

namespace mi::gates {
namespace fs = std::filesystem;

namespace {

constexpr const char* kInsideRoot = "/sbx";  // where the sandbox directory appears inside the namespace

bool tool_works(const std::vector<std::string>& argv) {
  const process::RunResult r = process::run(argv, {.timeout_s = 30, .merge_stderr = true});
  return r.exit_code == 0;
}

// bubblewrap arguments that show the engine only /usr (read-only), a private /proc, /dev and /tmp, and `root`.
std::vector<std::string> bwrap_prefix(const fs::path& root) {
  std::vector<std::string> a = {"bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink",
                                "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"};
  if (fs::exists("/etc/ld.so.cache")) a.insert(a.end(), {"--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"});
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", root.string(), kInsideRoot,
                     "--bind", (root / "out").string(), std::string(kInsideRoot) + "/out", "--unshare-all",
                     "--die-with-parent", "--new-session", "--chdir", kInsideRoot, "--clearenv", "--setenv", "PATH",
                     "/usr/bin"});
  return a;
}

bool bwrap_available() {
  static const bool ok = [] {
    char tmpl[] = "/tmp/mi-bwrap-probe-XXXXXX";
    if (!mkdtemp(tmpl)) return false;
    fs::create_directories(fs::path(tmpl) / "out");
    std::vector<std::string> argv = bwrap_prefix(tmpl);
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

// The path arguments of file system calls made after the engine binary was executed (strace -f output).
std::vector<std::string> audited_paths(const std::string& log, const std::string& binary_inside) {
  std::vector<std::string> paths;
  std::istringstream in(log);
  bool started = false;
  for (std::string line; std::getline(in, line);) {
    if (!started) {
      started = line.find("execve(\"" + binary_inside + "\"") != std::string::npos;
      continue;
    }
    const auto open = line.find("(\"");
    const auto at_fd = line.find(", \"");  // openat(AT_FDCWD, "path" ...) and friends
    std::size_t q = std::string::npos;
    if (open != std::string::npos && (at_fd == std::string::npos || open < at_fd)) q = open + 1;
    else if (at_fd != std::string::npos) q = at_fd + 2;
    if (q == std::string::npos) continue;
    const auto end = line.find('"', q + 1);
    if (end == std::string::npos) continue;
    paths.push_back(line.substr(q + 1, end - q - 1));
  }
  return paths;
}

bool allowed_path(const std::string& p, const std::string& root) {
  if (p.empty() || p[0] != '/') return true;  // relative to the sandbox working directory
  if (p == root || p.rfind(root + "/", 0) == 0) return true;
  for (const char* prefix : {"/usr/", "/lib/", "/lib64/", "/proc/", "/sys/devices/system/cpu", "/dev/",
                             "/etc/ld.so.cache", "/etc/ld.so.preload"})
    if (p.rfind(prefix, 0) == 0) return true;
  return false;
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

Sandbox::Sandbox(const fs::path& binary, const std::string& expected_sha256, bool isolate) {
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
  bwrap_ = isolate && bwrap_available();
  audit_ = isolate && strace_available();
}

Sandbox::~Sandbox() {
  std::error_code ec;
  fs::remove_all(root_, ec);
  fs::remove_all(root_.string() + ".audit", ec);
}

std::string Sandbox::inside(const fs::path& host) const {
  if (!bwrap_) return host.string();
  return std::string(kInsideRoot) + "/" + fs::relative(host, root_).generic_string();
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
  const bool audit = audit_;
  const std::string binary_inside = inside(root_ / binary_name_);
  std::vector<std::string> argv;
  const fs::path log = fs::path(root_.string() + ".audit") / ("run-" + std::to_string(runs_++) + ".log");
  if (audit) {
    fs::create_directories(log.parent_path());
    argv = {"strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=%file,execve", "-o", log.string()};
  }
  if (bwrap_) {
    const auto prefix = bwrap_prefix(root_);
    argv.insert(argv.end(), prefix.begin(), prefix.end());
  }
  argv.push_back(binary_inside);
  argv.insert(argv.end(), args.begin(), args.end());
  SandboxRun run;
  run.result = process::run(argv, {.cwd = root_, .env = {{"PATH", "/usr/bin:/bin"}}, .clear_env = true,
                                   .timeout_s = timeout_s});
  if (audit) {
    std::set<std::string> outside;
    const std::string root_inside = bwrap_ ? kInsideRoot : root_.string();
    for (const auto& p : audited_paths(generator::read_file(log), binary_inside))
      if (!allowed_path(p, root_inside)) outside.insert(p);
    run.outside_paths.assign(outside.begin(), outside.end());
  }
  return run;
}

std::string Sandbox::isolation() const {
  std::string s = bwrap_ ? "bubblewrap: own mount/pid/net namespaces; the engine sees only a random-named copy "
                           "directory (read-only) and /usr"
                         : "no bubblewrap: random-named copy directory as working directory, empty environment";
  s += audit_ ? "; strace audit of every path the engine named" : "; no file-access audit (strace missing)";
  return s;
}

}  // namespace mi::gates
