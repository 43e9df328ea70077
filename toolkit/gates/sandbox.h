// Where the engine under test runs during the gates: a fresh directory with a random name that holds only a copy of
// the binary (checked against the sha256 B0 recorded) and copies of checkpoint inputs (config.json + weights) under
// random names. With bubblewrap the engine runs in its own mount, PID, IPC, UTS and network namespaces and sees
// nothing but that directory (read-only, at a random path), a writable out/ for the files it must produce, and the
// system's read-only /usr, less the foreign framework sources installed there (agents/system_references.h: an engine
// an agent wrote must not read a reference tree and pass it on, encoded, in its gate evidence). Audited runs
// (acceptance) need bubblewrap; in addition strace records every path the engine's processes name in a file system
// call, and any outside the sandbox and the system directories, or inside a hidden one, is reported: a binary that
// looks for the answers is caught even when it cannot reach them. Timed runs (L3) fall back to the
// copy directory as working directory and an empty environment where bubblewrap does not run.
//
// Peak RSS comes from /usr/bin/time run inside the sandbox as the engine's parent, on stderr under a random tag:
// wait4 in the gate runner would see nothing through bubblewrap's PID namespace, and a child forked from the gate
// runner inherits its high-water RSS.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "process/subprocess.h"

namespace mi::gates {

struct SandboxRun {
  process::RunResult result;               // result.peak_rss_kb: the engine's own peak (0 when not measurable)
  std::vector<std::string> outside_paths;  // paths outside the sandbox the engine named (audit), deduplicated
};

class Sandbox {
 public:
  enum class Mode {
    audited,  // isolated where bubblewrap runs, every file access audited (acceptance)
    timed,    // isolated where bubblewrap runs, no audit (L3 timing runs: strace would slow the engine)
  };

  // Copies `binary` in under a random name; mi::Error when the copy's sha256 is not `expected_sha256`, or when an
  // audited sandbox has no bubblewrap to stand on. `hidden`: system paths covered under bubblewrap (an empty tmpfs
  // over a directory, /dev/null over a file) and reported by the audit when named; the host's installed reference
  // trees unless a test passes others.
  Sandbox(const std::filesystem::path& binary, const std::string& expected_sha256, Mode mode = Mode::audited,
          std::vector<std::filesystem::path> hidden = default_hidden());
  static std::vector<std::filesystem::path> default_hidden();
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Copies config.json, model*.safetensors and the shard index of `checkpoint` into a new random-named directory;
  // returns the path the engine is given. host_path() maps it back to the copy on this machine.
  std::string add_checkpoint(const std::filesystem::path& checkpoint);
  std::filesystem::path host_path(const std::string& engine_path) const;
  // A path for a file the engine writes (in out/), as the engine names it, and where the gate reads it.
  std::string out_path(const std::string& name) const;
  std::filesystem::path host_out_path(const std::string& name) const;

  // Runs the binary with `args` (paths as add_checkpoint/out_path returned them).
  SandboxRun run(const std::vector<std::string>& args, double timeout_s = 900) const;

  // How the engine is isolated, for the report.
  std::string isolation() const;

 private:
  std::string inside(const std::filesystem::path& host) const;

  std::filesystem::path root_;  // host directory
  std::string inside_root_;     // where the engine sees it: a random path under bubblewrap, root_ without
  std::string binary_name_;
  std::vector<std::filesystem::path> hidden_;
  bool bwrap_ = false, audit_ = false;
  mutable int runs_ = 0;
};

// A fresh random name: 16 lowercase hex characters.
std::string random_name();

}  // namespace mi::gates
