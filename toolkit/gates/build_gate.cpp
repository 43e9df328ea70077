// B0 (ckb/test_contracts/gates.toml): a clean build of the engine directory; the gate runner hashes what it built.
// Or, for the agents' final gates, the hashes of what a confined build left (prebuilt_build_gate).
#include <chrono>
#include <filesystem>

#include "common/error.h"
#include "gates/gates.h"
#include "generator/manifest.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

std::string check_executable(const generator::Engine& engine, const BuildRecord& record, const std::string& name) {
  const auto it = record.executables.find(name);
  if (it == record.executables.end()) return "build/" + name + " was not built by B0 in this verification";
  const fs::path file = engine.dir / "build" / name;
  if (!fs::exists(file)) return "build/" + name + " is missing";
  const std::string sha = generator::sha256_file(file);
  if (sha != it->second)
    return "build/" + name + " has sha256 " + sha + ", not the " + it->second + " B0 built (replaced after the build)";
  return "";
}

nlohmann::json engine_plan(const generator::Engine& engine) {
  const fs::path file = engine.dir / "plan.json";
  std::string listed;
  for (const auto& f : engine.manifest.value("files", nlohmann::json::array()))
    if (f.value("path", "") == "plan.json") listed = f.value("sha256", "");
  if (listed.empty()) fail(engine.dir.string(), ": MANIFEST.json lists no plan.json (the coverage plan the gates read)");
  if (!fs::is_regular_file(fs::symlink_status(file))) fail(file.string(), ": missing (or not a regular file)");
  const std::string text = generator::read_file(file);
  if (const std::string sha = generator::sha256_hex(text); sha != listed)
    fail(file.string(), ": sha256 ", sha, " differs from the ", listed, " MANIFEST.json lists: the plan was changed after the generator wrote it");
  const nlohmann::json plan = nlohmann::json::parse(text, nullptr, false);
  if (plan.is_discarded() || !plan.is_object()) fail(file.string(), ": not a JSON object");
  return plan;
}

namespace {

// The sha256 of the binary and of the stage executables present (only when stage tests were built), into `record`
// and the gate's evidence.
void record_executables(const generator::Engine& engine, bool stage_tests, BuildRecord& record, GateResult& g) {
  record.binary_sha256 = generator::sha256_file(engine.binary);
  record.executables[engine.binary.filename().string()] = record.binary_sha256;
  for (const auto& stage : engine.stage_tests) {
    const fs::path exe = engine.dir / "build" / ("stage_" + stage);
    if (stage_tests && fs::exists(exe)) record.executables[exe.filename().string()] = generator::sha256_file(exe);
  }
  g.evidence["binary_bytes"] = fs::file_size(engine.binary);
  g.evidence["executables_sha256"] = record.executables;
}

}  // namespace

GateResult build_gate(const generator::Engine& engine, int jobs, BuildRecord& record, bool stage_tests) {
  GateResult g{"B0_build", "build", "basic_execution", false, "", {}, 0, nlohmann::json::object()};
  const auto start = std::chrono::steady_clock::now();
  const fs::path build = engine.dir / "build";
  // Always from scratch: whatever DIR/build held (a binary newer than its sources, objects from elsewhere) is gone.
  // Unchanged objects still come back from ccache, which keys them by their preprocessed sources.
  fs::remove_all(build);
  std::vector<std::string> configure = {"cmake", "-S", engine.dir.string(), "-B", build.string(), "-G", "Ninja",
                                        "-DCMAKE_BUILD_TYPE=Release"};
  if (std::system("command -v ccache >/dev/null 2>&1") == 0) configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache");
  std::vector<std::string> compile = {"cmake", "--build", build.string(), "-j", std::to_string(jobs)};
  if (!stage_tests) compile.insert(compile.end(), {"--target", engine.binary.filename().string()});
  std::string log;
  for (const auto& argv : {configure, compile}) {
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
  g.summary = g.passed ? "built " + engine.binary.filename().string() + (stage_tests ? "" : " (no stage tests: no L1 gate selected)") +
                             " from scratch"
                       : "build produced no binary " + engine.binary.string();
  if (g.passed) record_executables(engine, stage_tests, record, g);
  g.evidence["log_tail"] = process::tail(log, 1500);
  g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

GateResult prebuilt_build_gate(const generator::Engine& engine, BuildRecord& record, bool stage_tests) {
  GateResult g{"B0_build", "build", "basic_execution", false, "", {}, 0, nlohmann::json::object()};
  const auto start = std::chrono::steady_clock::now();
  const auto type_of = [](const fs::path& p) {  // of the path itself: a symlink is a symlink, whatever it leads to
    std::error_code ec;
    return fs::symlink_status(p, ec).type();
  };
  std::string problem;
  if (type_of(engine.dir / "build") != fs::file_type::directory) problem = "build/ is missing or not a directory of its own";
  else if (type_of(engine.binary) != fs::file_type::regular)
    problem = "build/" + engine.binary.filename().string() + " is missing or not a regular file";
  for (const auto& stage : engine.stage_tests) {
    const fs::path exe = engine.dir / "build" / ("stage_" + stage);
    const fs::file_type t = type_of(exe);
    if (problem.empty() && stage_tests && t != fs::file_type::not_found && t != fs::file_type::regular)
      problem = "build/" + exe.filename().string() + " is not a regular file";
  }
  g.passed = problem.empty();
  g.summary = g.passed ? "hashed " + engine.binary.filename().string() + " as the confined build left it (not built here)"
                       : "the confined build's tree is unusable: " + problem;
  if (g.passed) record_executables(engine, stage_tests, record, g);
  g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace mi::gates
