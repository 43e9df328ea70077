// The L1 stage gate judges a stage by what its test executable ran (GoogleTest's JSON report against the tests the
// contract declares), not by its exit status: agent-written code linked into the executable can make it exit 0
// without running a test. The executable here is a planted stand-in whose behaviour each case chooses.
#include <gtest/gtest.h>

#include <fstream>

#include "../planted_stage_executable.h"
#include "../toolkit_support.h"
#include "agents_test_support.h"
#include "gates/gates.h"
#include "gates/gtest_results.h"
#include "generator/manifest.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using agents_test::write;

constexpr const char* kContract = R"(// TEST(Commented, Out) is not a test
TEST(BasicExecution, MatvecMatches) { EXPECT_EQ(1, 1); }
TEST_F(KernelFixture, RmsNormUsesTheMean) {}
/* TEST(Block, Comment) */
)";

// A GoogleTest JSON report with the given (suite, name, failure message or "") tests.
std::string gtest_report(const std::vector<std::tuple<std::string, std::string, std::string>>& tests) {
  json suites = json::array();
  int failures = 0;
  for (const auto& [suite, name, failure] : tests) {
    json t = {{"name", name}, {"status", "RUN"}, {"result", "COMPLETED"}, {"classname", suite}};
    if (!failure.empty()) {
      t["failures"] = json::array({{{"failure", failure}, {"type", ""}}});
      ++failures;
    }
    suites.push_back({{"name", suite}, {"tests", 1}, {"failures", failure.empty() ? 0 : 1}, {"testsuite", json::array({t})}});
  }
  return json{{"tests", tests.size()}, {"failures", failures}, {"errors", 0}, {"name", "AllTests"}, {"testsuites", suites}}.dump();
}

struct PlantedStage {
  mi_test::TempDir dir{"l1-gtest"};
  mi::generator::Engine engine;
  mi::gates::BuildRecord record;
  mi::gates::GateOptions options;
  PlantedStage() {
    engine.dir = dir.path();
    engine.name = "e";
    engine.manifest = {{"constraints", {{"model", (dir / "model").string()}}}};
    write(dir / "tests/stage_basic_execution_test.cpp", kContract);
  }
  // The stage executable: a shell script that runs `body` (with $out the --gtest_output file), recorded as B0's.
  mi::gates::GateResult run(const std::string& body) {
    mi_test::plant_stage_executable(dir.path(), "basic_execution", body, record);
    return mi::gates::stage_gate(engine, "basic_execution", options, record);
  }
};

TEST(StageGateResults, AnExecutableThatExitsZeroWithoutRunningTestsFails) {
  PlantedStage s;
  const auto g = s.run("exit 0");
  EXPECT_FALSE(g.passed) << g.summary;
  EXPECT_NE(g.summary.find("no GoogleTest report"), std::string::npos) << g.summary;
}

TEST(StageGateResults, EveryDeclaredTestMustRunAndPass) {
  PlantedStage s;
  const auto all = gtest_report({{"BasicExecution", "MatvecMatches", ""}, {"KernelFixture", "RmsNormUsesTheMean", ""}});
  const auto pass = s.run("cat > \"$out\" <<'EOF'\n" + all + "\nEOF\nexit 0");
  EXPECT_TRUE(pass.passed) << pass.summary;
  EXPECT_EQ(pass.evidence["tests_run"], 2);

  // One declared test absent (the executable ran other tests, or fewer).
  const auto one = gtest_report({{"BasicExecution", "MatvecMatches", ""}, {"Other", "Thing", ""}});
  const auto missing = s.run("cat > \"$out\" <<'EOF'\n" + one + "\nEOF\nexit 0");
  EXPECT_FALSE(missing.passed);
  EXPECT_NE(missing.summary.find("KernelFixture.RmsNormUsesTheMean"), std::string::npos) << missing.summary;

  // A failure recorded in the report fails the stage even when the exit status says 0.
  const auto bad = gtest_report({{"BasicExecution", "MatvecMatches", "expected 1, got 2"}, {"KernelFixture", "RmsNormUsesTheMean", ""}});
  const auto failed = s.run("cat > \"$out\" <<'EOF'\n" + bad + "\nEOF\nexit 0");
  EXPECT_FALSE(failed.passed);
  EXPECT_NE(failed.summary.find("expected 1, got 2"), std::string::npos) << failed.summary;

  // A clean report with a failing exit status is not a pass either.
  const auto crashed = s.run("cat > \"$out\" <<'EOF'\n" + all + "\nEOF\nexit 3");
  EXPECT_FALSE(crashed.passed);
  EXPECT_NE(crashed.summary.find("exit 3"), std::string::npos) << crashed.summary;

  // No test run at all, and a report that is not JSON.
  EXPECT_FALSE(s.run("echo '{\"tests\": 0, \"failures\": 0, \"testsuites\": []}' > \"$out\"").passed);
  EXPECT_FALSE(s.run("echo 'PASSED' > \"$out\"").passed);
}

TEST(StageGateResults, SkippedTestsDoNotCountAsRun) {
  json report = json::parse(gtest_report({{"BasicExecution", "MatvecMatches", ""}, {"KernelFixture", "RmsNormUsesTheMean", ""}}));
  report["testsuites"][1]["testsuite"][0]["result"] = "SKIPPED";
  const auto v = mi::gates::judge_gtest_report(report, mi::gates::declared_gtest_tests(kContract));
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.missing, std::vector<std::string>{"KernelFixture.RmsNormUsesTheMean"});
}

TEST(StageGateResults, DeclaredTestsComeFromTheContractSource) {
  EXPECT_EQ(mi::gates::declared_gtest_tests(kContract),
            (std::vector<std::string>{"BasicExecution.MatvecMatches", "KernelFixture.RmsNormUsesTheMean"}));
  // The repository's real contracts declare their tests (the gate refuses a contract that declares none).
  for (const char* stage : {"basic_execution", "model_components", "framework_integration"}) {
    std::ifstream in(fs::path(METAINFER_SOURCE_DIR) / "tests/engine_contracts" / (std::string("stage_") + stage + "_test.cpp"));
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_GE(mi::gates::declared_gtest_tests(text).size(), 5u) << stage;
  }
}

}  // namespace
