#include "agents/engine_gate.h"

#include <nlohmann/json.hpp>

#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "process/subprocess.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The host's ccache directory, when ccache is installed: read-only inside the sandbox.
std::string host_ccache_dir() {
  const process::RunResult r = process::run({"ccache", "-k", "cache_dir"}, {.timeout_s = 10});
  if (r.exit_code != 0) return "";
  std::string dir = r.out;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  return fs::is_directory(dir) ? dir : "";
}

// What a failed verification says, for the next round's implementer: each failing gate's summary and evidence.
std::string evidence_of(const json& report) {
  std::string out = "verification state: " + report.value("state", "?") + "\n";
  for (const json& g : report.value("gates", json::array())) {
    out += std::string(g.value("passed", false) ? "PASSED " : "FAILED ") + g.value("id", "?") + ": " + g.value("summary", "") + "\n";
    if (!g.value("passed", false) && g.contains("evidence")) out += g["evidence"].dump(2) + "\n";
  }
  return out;
}

}  // namespace

GateRunner engine_stage_gate(EngineGateOptions o) {
  return [o](const fs::path& run_dir, const std::string& stage) -> GateOutcome {
    std::vector<fs::path> readonly = {o.source_dir};
    if (!o.metainfer_binary.empty() && o.metainfer_binary.lexically_relative(o.source_dir).string().rfind("..", 0) == 0)
      readonly.push_back(o.metainfer_binary.parent_path());
    std::map<std::string, std::string> env;
    if (const std::string cache = host_ccache_dir(); !cache.empty()) {
      readonly.push_back(cache);
      env = {{"CCACHE_DISABLE", ""}, {"CCACHE_DIR", cache}, {"CCACHE_READONLY", "1"}, {"CCACHE_TEMPDIR", "/tmp"}};
    }
    std::string command = "'";
    command.append(o.metainfer_binary.string()).append("' verify . --only L1_stage:").append(stage);
    command.append(" --allow-modified-sources --threads 1 --json");
    // Protected paths stay read-only, except reports/: the verifier writes reports/verification.{json,md} there.
    std::vector<fs::path> overlays;
    for (const auto& p : protected_mount_points(run_dir))
      if (p != run_dir / "reports") overlays.push_back(p);
    const CommandResult r = run_isolated_command(command, run_dir, readonly, o.timeout_s, o.max_evidence_bytes * 4, {}, overlays, env);
    if (r.timed_out) return {false, "the verifier timed out after " + std::to_string(int(o.timeout_s)) + " s\n" + process::tail(r.output, o.max_evidence_bytes)};
    json report;
    try {
      report = process::last_json_line(r.output);
    } catch (const std::exception&) {
      return {false, "the verifier gave no report (exit status " + std::to_string(r.exit_code) + "):\n" + process::tail(r.output, o.max_evidence_bytes)};
    }
    const bool passed = r.exit_code == 0 && report.value("state", "") == "PASSED:L1_stage:" + stage;
    return {passed, process::tail(evidence_of(report), o.max_evidence_bytes)};
  };
}

}  // namespace mi::agents
