// L1 stage tests and L2 regression (ckb/test_contracts/gates.toml): the engine's own test-contract executables,
// built from its tree, run as subprocesses; the exit status decides.
#include <chrono>

#include "gates/gates.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

namespace {

fs::path stage_model(const generator::Engine& engine, const GateOptions& options) {
  if (!options.stage_model.empty()) return options.stage_model;
  return engine.manifest.at("constraints").at("model").get<std::string>();
}

process::RunResult run_stage(const generator::Engine& engine, const std::string& stage, const GateOptions& options) {
  const fs::path exe = engine.dir / "build" / ("stage_" + stage);
  return process::run({exe.string(), "--gtest_brief=1"},
                      {.env = {{"METAINFER_STAGE_MODEL", stage_model(engine, options).string()},
                               {"METAINFER_STAGE_THREADS", std::to_string(options.threads)}},
                       .timeout_s = 900,
                       .merge_stderr = true});
}

}  // namespace

GateResult stage_gate(const generator::Engine& engine, const std::string& stage, const GateOptions& options) {
  GateResult g{"L1_stage:" + stage, "L1", stage, false, "", {}, 0, nlohmann::json::object()};
  const process::RunResult r = run_stage(engine, stage, options);
  g.commands.push_back("METAINFER_STAGE_MODEL=" + stage_model(engine, options).string() + " " + r.command);
  g.duration_s = r.wall_s;
  g.passed = r.exit_code == 0 && !r.timed_out;
  g.summary = g.passed ? "stage " + stage + " test contracts pass"
                       : "stage " + stage + " test contracts FAIL (exit " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + ")";
  g.evidence["output_tail"] = process::tail(r.out, g.passed ? 600 : 6000);
  return g;
}

GateResult regression_gate(const generator::Engine& engine, const std::vector<std::string>& earlier,
                           const GateOptions& options) {
  GateResult g{"L2_regression", "L2", "", true, "", {}, 0, nlohmann::json::object()};
  for (const auto& stage : earlier) {
    g.stage += (g.stage.empty() ? "" : ",") + stage;
    const process::RunResult r = run_stage(engine, stage, options);
    g.commands.push_back(r.command);
    g.duration_s += r.wall_s;
    g.evidence[stage] = r.exit_code == 0 ? "pass" : process::tail(r.out, 4000);
    if (r.exit_code != 0 || r.timed_out) {
      g.passed = false;
      g.summary = "regression: stage " + stage + " no longer passes";
    }
  }
  if (g.passed) g.summary = "earlier stages still pass: " + g.stage;
  g.id += ":" + g.stage;
  return g;
}

}  // namespace mi::gates
