// L1 stage tests (ckb/test_contracts/gates.toml): the engine's own test-contract executables, built from its tree by
// B0 (hash-checked before they run), run as subprocesses; the exit status decides.
#include <chrono>

#include "gates/gates.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

GateResult stage_gate(const generator::Engine& engine, const std::string& stage, const GateOptions& options,
                      const BuildRecord& record) {
  GateResult g{"L1_stage:" + stage, "L1", stage, false, "", {}, 0, nlohmann::json::object()};
  const std::string exe_name = "stage_" + stage;
  const std::string replaced = check_executable(engine, record, exe_name);
  if (!replaced.empty()) {
    g.summary = replaced;
    return g;
  }
  const fs::path model = options.stage_model.empty() ? fs::path(engine.manifest.at("constraints").at("model").get<std::string>())
                                                     : options.stage_model;
  const process::RunResult r = process::run({(engine.dir / "build" / exe_name).string(), "--gtest_brief=1"},
                                            {.env = {{"METAINFER_STAGE_MODEL", model.string()},
                                                     {"METAINFER_STAGE_THREADS", std::to_string(options.threads)}},
                                             .timeout_s = 900,
                                             .merge_stderr = true});
  g.commands.push_back("METAINFER_STAGE_MODEL=" + model.string() + " " + r.command);
  g.duration_s = r.wall_s;
  g.passed = r.exit_code == 0 && !r.timed_out;
  g.summary = g.passed ? "stage " + stage + " test contracts pass"
                       : "stage " + stage + " test contracts FAIL (exit " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + ")";
  g.evidence["output_tail"] = process::tail(r.out, g.passed ? 600 : 6000);
  return g;
}

}  // namespace mi::gates
