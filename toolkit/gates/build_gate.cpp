#include <chrono>
#include <filesystem>

#include "gates/gates.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

GateResult build_gate(const generator::Engine& engine, int jobs) {
  GateResult g{"B0_build", "build", "basic_execution", false, "", {}, 0, nlohmann::json::object()};
  const auto start = std::chrono::steady_clock::now();
  const fs::path build = engine.dir / "build";
  std::vector<std::string> configure = {"cmake", "-S", engine.dir.string(), "-B", build.string(), "-G", "Ninja",
                                        "-DCMAKE_BUILD_TYPE=Release"};
  if (std::system("command -v ccache >/dev/null 2>&1") == 0) configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache");
  std::string log;
  for (const auto& argv : {configure, std::vector<std::string>{"cmake", "--build", build.string(), "-j", std::to_string(jobs)}}) {
    // ccache: paths relative to the engine directory, so identical sources hit the cache across engines.
    const process::RunResult r = process::run(
        argv, {.env = {{"CCACHE_BASEDIR", engine.dir.string()}, {"CCACHE_NOHASHDIR", "1"}}, .timeout_s = 1800, .merge_stderr = true});
    g.commands.push_back(r.command);
    log += r.out;
    if (r.exit_code != 0) {
      g.summary = "build failed (exit " + std::to_string(r.exit_code) + "): " + r.command;
      g.evidence["log_tail"] = process::tail(log);
      g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return g;
    }
  }
  g.passed = fs::exists(engine.binary);
  g.summary = g.passed ? "built " + engine.binary.filename().string() : "build produced no binary " + engine.binary.string();
  if (g.passed) g.evidence["binary_bytes"] = fs::file_size(engine.binary);
  g.evidence["log_tail"] = process::tail(log, 1500);
  g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace mi::gates
