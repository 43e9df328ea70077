// The L1 stage gate against planted cheats: a contract whose tests the declared-test parser must not lose (raw
// strings, comments, macros split across lines, parameterised and typed tests), reports that list other tests than
// the contract's or whose totals were not written by GoogleTest, and engine sources that would tamper with GoogleTest
// inside the stage executable (a shadowing gtest.h, redefined EXPECT_ macros, a main() of their own).
#include <gtest/gtest.h>

#include <fstream>

#include "../planted_stage_executable.h"
#include "../toolkit_support.h"
#include "gates/cpp_code_text.h"
#include "gates/gates.h"
#include "gates/gtest_results.h"
#include "gates/stage_source_rules.h"
#include "generator/manifest.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using mi::gates::declared_gtest_tests;
using mi::gates::judge_gtest_report;
using Names = std::vector<std::string>;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A GoogleTest JSON report listing (suite, name) tests, all completed, totals as GoogleTest writes them.
json report_of(const std::vector<std::pair<std::string, std::string>>& tests) {
  json suites = json::array();
  for (const auto& [suite, name] : tests) {
    json t = {{"name", name}, {"status", "RUN"}, {"result", "COMPLETED"}, {"classname", suite}};
    if (!suites.empty() && suites.back()["name"] == suite) {
      suites.back()["testsuite"].push_back(t);
      suites.back()["tests"] = suites.back()["testsuite"].size();
    } else {
      suites.push_back({{"name", suite}, {"tests", 1}, {"failures", 0}, {"testsuite", json::array({t})}});
    }
  }
  return {{"tests", tests.size()}, {"failures", 0}, {"errors", 0}, {"name", "AllTests"}, {"testsuites", suites}};
}

TEST(StageDeclaredTests, RawStringsCommentsAndLiteralsHideNoTestAndInventNone) {
  // Each line would fool a scanner that does not lex C++: the quote inside the raw string used to open a string that
  // ran to the end of the line and swallowed Real.First; the others hold text that looks like a test.
  const std::string contract = R"CPP(const char* k = R"x(a"b)x"; TEST(Real, First) {}
const char* fake = "TEST(Fake, InAString)";
const char* raw = R"(
TEST(Fake, InARawString) {}
)";
char quote = '"'; TEST(Real, AfterACharQuote) {}
int big = 1'000'000; TEST(Real, AfterDigitSeparators) {}
// TEST(Fake, InALineComment)
/* TEST(Fake, InABlockComment) */
TEST(Real,
     SplitOverLines) {}
TEST(Real, Spliced\
Name) {}
TEST(DISABLED_Real, NotRun) {}
FRIEND_TEST(Fake, AFriendDeclaration);
)CPP";
  EXPECT_EQ(declared_gtest_tests(contract),
            (Names{"Real.First", "Real.AfterACharQuote", "Real.AfterDigitSeparators", "Real.SplitOverLines", "Real.SplicedName"}));
}

TEST(StageDeclaredTests, ParameterisedAndTypedTestsAreDeclaredAndMatchTheirInstances) {
  const std::string contract = R"CPP(TEST_F(Fixture, Plain) {}
TEST_P(Param, EachValue) {}
INSTANTIATE_TEST_SUITE_P(Values, Param, ::testing::Values(1, 2));
TYPED_TEST_SUITE(Typed, MyTypes);
TYPED_TEST(Typed, EachType) {}
TYPED_TEST_P(TypedP, EachTypeP) {}
REGISTER_TYPED_TEST_SUITE_P(TypedP, EachTypeP);
GTEST_TEST(Alias, Works) {}
)CPP";
  const Names declared = declared_gtest_tests(contract);
  ASSERT_EQ(declared, (Names{"Fixture.Plain", "Param.EachValue", "Typed.EachType", "TypedP.EachTypeP", "Alias.Works"}));
  // The report names instances as GoogleTest does.
  const json report = report_of({{"Fixture", "Plain"}, {"Values/Param", "EachValue/0"}, {"Values/Param", "EachValue/1"},
                                 {"Typed/0", "EachType"}, {"Typed/1", "EachType"}, {"Inst/TypedP/0", "EachTypeP"}, {"Alias", "Works"}});
  const auto v = judge_gtest_report(report, declared);
  EXPECT_TRUE(v.passed) << v.describe();
  EXPECT_EQ(v.tests_run, 7);
  // An instance that did not complete leaves its test missing.
  json skipped = report;
  skipped["testsuites"][1]["testsuite"][1]["result"] = "SKIPPED";
  const auto s = judge_gtest_report(skipped, declared);
  EXPECT_FALSE(s.passed);
  EXPECT_EQ(s.missing, Names{"Param.EachValue"});
}

TEST(StageReportCheats, AReportWithTestsTheContractDoesNotDeclareFails) {
  // Tests compiled in from the engine's sources, or a report written by hand: the declared ones all pass, but more ran.
  const auto v = judge_gtest_report(report_of({{"Real", "First"}, {"Engine", "Planted"}}), {"Real.First"});
  EXPECT_FALSE(v.passed) << v.describe();
  EXPECT_EQ(v.extra, Names{"Engine.Planted"});
  EXPECT_NE(v.describe().find("does not declare (Engine.Planted)"), std::string::npos) << v.describe();
}

TEST(StageReportCheats, AReportWhoseTotalsDisagreeWithItsEntriesFails) {
  json r = report_of({{"Real", "First"}});
  r.erase("tests");  // a hand-written report that lists the test but never counts it
  EXPECT_FALSE(judge_gtest_report(r, {"Real.First"}).passed);
  r = report_of({{"Real", "First"}});
  r["tests"] = 2;
  const auto v = judge_gtest_report(r, {"Real.First"});
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.problem.find("counts"), std::string::npos) << v.describe();
  r = report_of({{"Real", "First"}});
  r["testsuites"][0]["tests"] = 3;
  EXPECT_FALSE(judge_gtest_report(r, {"Real.First"}).passed);
}

// An engine directory whose stage executable (a shell script) writes a report in which every declared test passed:
// without the source rules the gate would pass it.
struct ForgedStage {
  mi_test::TempDir dir{"l1-cheat"};
  mi::generator::Engine engine;
  mi::gates::BuildRecord record;
  mi::gates::GateOptions options;
  ForgedStage() {
    engine.dir = dir.path();
    engine.name = "e";
    engine.manifest = {{"constraints", {{"model", (dir / "model").string()}}}};
    put(dir / "tests/stage_basic_execution_test.cpp", "#include <gtest/gtest.h>\nTEST(Basic, Runs) { EXPECT_EQ(1, 1); }\n");
    put(dir / "src/kernels/matvec.cpp", "// The engine's own code.\nint matvec() { return 1; }\n");
    mi_test::plant_stage_executable(dir.path(), "basic_execution",
                                    "cat > \"$out\" <<'EOF'\n" + report_of({{"Basic", "Runs"}}).dump() + "\nEOF", record);
  }
  mi::gates::GateResult run() { return mi::gates::stage_gate(engine, "basic_execution", options, record); }
};

TEST(StageReportCheats, TheForgedStagePassesWithCleanSources) {
  ForgedStage s;
  const auto g = s.run();
  EXPECT_TRUE(g.passed) << g.summary;  // the baseline: each case below differs from it by one planted file
}

TEST(StageReportCheats, EngineFilesThatTamperWithGoogleTestFailTheStageUnrun) {
  const std::vector<std::pair<std::string, std::string>> cheats = {
      // A header that shadows GoogleTest's on the include path (-I src comes first).
      {"src/gtest/gtest.h", "#pragma once\n#define TEST(a, b) void a##b()\n"},
      {"src/gtest/internal/gtest-port.h", "#pragma once\n"},
      // A header that shadows one GoogleTest includes.
      {"src/stdlib.h", "#pragma once\n"},
      {"src/vector", "#pragma once\n"},
      // Macro surgery, also hidden behind a comment or a line splice, and from a file outside src/.
      {"src/kernels/matvec.h", "#pragma once\n#undef EXPECT_EQ\n#define EXPECT_EQ(a, b) (void)0\n"},
      {"src/kernels/norm.h", "#pragma once\n# /* x */ define \\\nASSERT_TRUE(c) if (false)\n"},
      {"notes/implementer/x.txt", "#define GTEST_SKIP() return\n"},
      {"src/kernels/push.h", "#pragma push_macro(\"EXPECT_NEAR\")\n"},
      // Code that talks to GoogleTest, or replaces gtest_main's main().
      {"src/runtime/report.cpp", "static const char* flag = \"--gtest_output\";\n"},
      {"src/runtime/listener.cpp", "void f() { ::testing::UnitTest::GetInstance(); }\n"},
      {"src/runtime/entry.cpp", "int main(int argc, char** argv) { return 0; }\n"},
  };
  for (const auto& [path, text] : cheats) {
    ForgedStage s;
    put(s.dir / path, text);
    const auto g = s.run();
    EXPECT_FALSE(g.passed) << path << ": " << g.summary;
    EXPECT_NE(g.summary.find("could tamper with GoogleTest"), std::string::npos) << path << ": " << g.summary;
    EXPECT_NE(g.evidence["source_problems"].dump().find(path), std::string::npos) << g.evidence.dump();
  }
}

TEST(StageReportCheats, TheComponentLibraryAndTheContractsBreakNoSourceRule) {
  // What generated engines carry (src/ from components/, tests/ from tests/engine_contracts) must pass untouched.
  mi_test::TempDir dir("l1-clean");
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "components", dir / "src", fs::copy_options::recursive);
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "tests/engine_contracts", dir / "tests", fs::copy_options::recursive);
  put(dir / "build/gtest/gtest.h", "#define TEST\n");  // build/ is B0's and recreated: not scanned
  EXPECT_EQ(mi::gates::stage_source_problems(dir.path()), Names{});
}

TEST(StageReportCheats, CodeTextBlanksLiteralsAndCommentsOnly) {
  EXPECT_EQ(mi::gates::cpp_code_text("a = \"x\\\"y\"; // c\nb = R\"d(\n)\")d\"; /* e */ c = 'q';"),
            "a = \"\";  \nb = \"\";   c = '';");
}

}  // namespace
