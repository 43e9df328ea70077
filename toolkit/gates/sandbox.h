// Where the engine under test runs during acceptance: a fresh directory with a random name that holds only a copy of
// the binary (checked against the sha256 B0 recorded) and copies of checkpoint inputs (config.json + weights) under
// random names. With bubblewrap the engine runs in its own mount, PID, IPC, UTS and network namespaces and sees
// nothing but that directory (read-only), a writable out/ for the files it must produce, and the system's read-only
// /usr; without bubblewrap it runs with that directory as its working directory and an environment that names
// nothing of the repository. With strace, every path the engine names in a file system call is recorded, and any
// outside the sandbox and the system directories is reported: a binary that looks for the answers is caught even
// when it cannot reach them.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "process/subprocess.h"

namespace mi::gates {

struct SandboxRun {
  process::RunResult result;
  std::vector<std::string> outside_paths;  // paths outside the sandbox the engine named (audit), deduplicated
};

class Sandbox {
 public:
  // Copies `binary` in under a random name; mi::Error when the copy's sha256 is not `expected_sha256`. `isolate`
  // false runs it without namespaces or audit (timing runs: wait4 sees no memory use through bubblewrap's PID
  // namespace, so peak RSS is measured on a direct child).
  Sandbox(const std::filesystem::path& binary, const std::string& expected_sha256, bool isolate = true);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Copies config.json, model*.safetensors and the shard index of `checkpoint` into a new random-named directory;
  // returns the path the engine is given.
  std::string add_checkpoint(const std::filesystem::path& checkpoint);
  // A path for a file the engine writes (in out/), as the engine names it, and where the gate reads it.
  std::string out_path(const std::string& name) const;
  std::filesystem::path host_out_path(const std::string& name) const;

  // Runs the binary with `args` (paths as add_checkpoint/out_path returned them).
  SandboxRun run(const std::vector<std::string>& args, double timeout_s = 900) const;

  // How the engine is isolated, for the report.
  std::string isolation() const;
  bool audited() const { return audit_; }

 private:
  std::string inside(const std::filesystem::path& host) const;

  std::filesystem::path root_;     // host directory
  std::string binary_name_;
  bool bwrap_ = false, audit_ = false;
  mutable int runs_ = 0;
};

// A fresh random name: 16 lowercase hex characters.
std::string random_name();

}  // namespace mi::gates
