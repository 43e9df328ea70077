// L1 stage tests (ckb/test_contracts/gates.toml): the engine's own test-contract executables, built from its tree by
// B0 (hash-checked before they run), run as subprocesses. The verdict comes from GoogleTest's JSON report of the run
// (gtest_results.h), checked against the tests the contract declares, and the exit status must agree: an
// executable whose code exits 0 without running the contract's tests fails. Before it runs, the engine directory
// must give the code compiled into it no easy way to tamper with GoogleTest in that process (stage_source_rules.h).
#include <cstdlib>
#include <fstream>

#include <unistd.h>

#include "common/error.h"
#include "gates/gates.h"
#include "gates/gtest_results.h"
#include "gates/stage_source_rules.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory for the report, outside the engine directory (the build tree is the tested code's own) and
// removed afterwards.
struct ReportDir {
  fs::path path;
  ReportDir() {
    std::string tmpl = (fs::temp_directory_path() / "metainfer-l1-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("L1 stage gate: cannot create a temporary directory for the test report");
    path = tmpl;
  }
  ~ReportDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

GateResult stage_gate(const generator::Engine& engine, const std::string& stage, const GateOptions& options,
                      const BuildRecord& record) {
  GateResult g{"L1_stage:" + stage, "L1", stage, false, "", {}, 0, nlohmann::json::object()};
  const std::string exe_name = "stage_" + stage;
  const std::string replaced = check_executable(engine, record, exe_name);
  if (!replaced.empty()) {
    g.summary = replaced;
    return g;
  }
  // Code compiled into the executable must not be able to tamper with GoogleTest in the process whose report is
  // the verdict (stage_source_rules.h).
  if (const std::vector<std::string> problems = stage_source_problems(engine.dir); !problems.empty()) {
    g.summary = "stage " + stage + ": the engine directory could tamper with GoogleTest inside the stage test (" + problems.front() +
                (problems.size() > 1 ? "; and " + std::to_string(problems.size() - 1) + " more" : "") + "); not run";
    g.evidence["source_problems"] = problems;
    return g;
  }
  const fs::path contract = engine.dir / "tests" / ("stage_" + stage + "_test.cpp");
  const std::vector<std::string> declared = declared_gtest_tests(read_text(contract));
  if (declared.empty()) {
    g.summary = "stage " + stage + ": the test contract " + contract.string() + " declares no tests";
    return g;
  }
  const fs::path model = options.stage_model.empty() ? fs::path(engine.manifest.at("constraints").at("model").get<std::string>())
                                                     : options.stage_model;
  const ReportDir reports;
  const fs::path report_file = reports.path / "results.json";
  const process::RunResult r = process::run({(engine.dir / "build" / exe_name).string(), "--gtest_brief=1",
                                             "--gtest_output=json:" + report_file.string()},
                                            {.env = {{"METAINFER_STAGE_MODEL", model.string()},
                                                     {"METAINFER_STAGE_THREADS", std::to_string(options.threads)}},
                                             .timeout_s = 900,
                                             .merge_stderr = true});
  g.commands.push_back("METAINFER_STAGE_MODEL=" + model.string() + " " + r.command);
  g.duration_s = r.wall_s;
  GtestVerdict verdict;
  if (!fs::is_regular_file(report_file)) verdict.problem = "the test executable wrote no GoogleTest report (it ran no test framework)";
  else {
    const nlohmann::json report = nlohmann::json::parse(read_text(report_file), nullptr, false);
    verdict = report.is_discarded() ? GtestVerdict{.problem = "the test report is not valid JSON"} : judge_gtest_report(report, declared);
  }
  g.passed = r.exit_code == 0 && !r.timed_out && verdict.passed;
  std::string why = verdict.describe();
  if (verdict.passed && !g.passed) why += ", but the executable exited " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "");
  g.summary = g.passed ? "stage " + stage + " test contracts pass (" + why + ")"
                       : "stage " + stage + " test contracts FAIL (exit " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "; " + why + ")";
  g.evidence["declared_tests"] = declared.size();
  g.evidence["tests_run"] = verdict.tests_run;
  g.evidence["failed_tests"] = verdict.failed;
  g.evidence["missing_tests"] = verdict.missing;
  g.evidence["undeclared_tests"] = verdict.extra;
  g.evidence["output_tail"] = process::tail(r.out, g.passed ? 600 : 6000);
  return g;
}

}  // namespace mi::gates
