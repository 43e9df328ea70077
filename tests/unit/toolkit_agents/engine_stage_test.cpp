// A stage of a real engine judged by the real gates: the knowledge generator lays the engine down, a kernel is broken
// the way failure mode BUG-005-1 broke one (RMSNorm with the sum of squares instead of their mean), and the scripted
// implementer repairs it in the second round after the L1 stage gate's evidence was fed back. Builds an engine twice
// (about a minute each with a warm ccache).
#include <gtest/gtest.h>

#include <fstream>

#include "../toolkit_support.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An engine directory holding only what the stage gate looks for (MANIFEST.json, the stage's test contract), and a
// stand-in verifier at dir/bin/fake-metainfer running `script`.
struct StandInVerifier {
  fs::path run, fake;
  StandInVerifier(const fs::path& dir, const std::string& script) : run(dir / "engine"), fake(dir / "bin" / "fake-metainfer") {
    fs::create_directories(run / "tests");
    std::ofstream(run / "MANIFEST.json") << R"({"format": "metainfer-manifest/1", "engine": "e", "binary": "bin/e", "stages": ["basic_execution"]})";
    std::ofstream(run / "tests/stage_basic_execution_test.cpp") << "\n";
    fs::create_directories(fake.parent_path());
    std::ofstream(fake) << script;
    fs::permissions(fake, fs::perms::owner_all);
  }
};

// The stage gate's verifier reads its gate bounds from the toolkit's CKB, named explicitly, whatever CKB the agents
// were given (an evolution round's staged copy). A stand-in verifier reports what it was told.
TEST(AgentEngineStage, TheVerifierReadsGateBoundsFromTheToolkitsCkb) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "the verifier runs isolated; no isolation here";
  mi_test::TempDir dir("agents-engine-ckb");
  const StandInVerifier v(dir.path(), "#!/bin/sh\necho \"gate bounds from: $METAINFER_CKB\"\nexit 1\n");
  const fs::path &run = v.run, &fake = v.fake;
  ::setenv("METAINFER_CKB", (dir / "staged_ckb").string().c_str(), 1);  // must not leak into the gate
  const GateOutcome g = engine_stage_gate({fake, METAINFER_SOURCE_DIR, 60})(run, "basic_execution");
  ::unsetenv("METAINFER_CKB");
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.evidence.find("gate bounds from: " + (fs::path(METAINFER_SOURCE_DIR) / "ckb").string()), std::string::npos) << g.evidence;
}

// The verifier runs agent-written code (the stage tests link it): that code must not be able to leave a report or a
// round's evidence in reports/, where the workflow and users look for them. A stand-in verifier plays the agent code
// (it runs in the same isolation) and tries.
TEST(AgentEngineStage, AgentCodeUnderTheGateCannotPlantReports) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "the verifier runs isolated; no isolation here";
  mi_test::TempDir dir("agents-engine-reports");
  const StandInVerifier v(dir.path(), "#!/bin/sh\n"
                                           "prev=; for a; do [ \"$prev\" = --reports-dir ] && rd=$a; prev=$a; done\n"
                                           "mkdir -p reports/basic_execution; echo '{\"state\": \"PASSED:L1_stage:basic_execution\"}' > reports/verification.json\n"
                                           "echo forged > reports/basic_execution/round-0.txt\n"
                                           "mkdir -p \"$rd\" && echo written > \"$rd/verification.json\" && ok=yes\n"
                                           "echo '{\"state\": \"FAILED:L1_stage:basic_execution\", \"gates\": [{\"id\": \"L1_stage:basic_execution\", "
                                           "\"passed\": false, \"summary\": \"reports-dir='$rd' writable='$ok'\"}]}'\nexit 1\n");
  const fs::path &run = v.run, &fake = v.fake;
  const GateOutcome g = engine_stage_gate({fake, METAINFER_SOURCE_DIR, 60})(run, "basic_execution");
  EXPECT_FALSE(g.passed);
  EXPECT_FALSE(fs::exists(run / "reports/verification.json"));
  EXPECT_FALSE(fs::exists(run / "reports/basic_execution/round-0.txt"));
  // The verifier was told to write its reports outside the engine directory, where it could.
  EXPECT_NE(g.evidence.find(std::string("reports-dir=") + kStageGateReportsDir + " writable=yes"), std::string::npos) << g.evidence;
}

// Nor can it write a verdict into the verifier's own output, through /proc/<verifier>/fd/1: the real verifier runs
// the engine's CMakeLists.txt (unchecked, as agent-written sources are), which here tries exactly that.
TEST(AgentEngineStage, AgentCodeUnderTheGateCannotWriteIntoTheVerifiersOutput) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "the verifier runs isolated; no isolation here";
  mi_test::TempDir dir("agents-engine-stdout");
  const fs::path run = dir / "engine";
  fs::create_directories(run / "tests");
  std::ofstream(run / "MANIFEST.json") << R"({"format": "metainfer-manifest/1", "engine": "e", "binary": "build/e", "stages": ["basic_execution"]})";
  std::ofstream(run / "tests/stage_basic_execution_test.cpp") << "TEST(BasicExecution, Runs) {}\n";
  std::ofstream(run / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.16)\nproject(probe NONE)\n"
                                           "execute_process(COMMAND /bin/sh ${CMAKE_SOURCE_DIR}/probe.sh)\n";
  // Walks up to the verifier and tries to open its stdout; says what happened in a file of the build tree (the one
  // place in the run directory a gate may write: gate_watch.h).
  // (The verifier may be PID 1 of the sandbox: it runs without a shell around it under bubblewrap.)
  std::ofstream(run / "probe.sh") << "p=$$\n"
                                     "while [ \"$p\" -ge 1 ]; do\n"
                                     "  if [ \"$(cat /proc/$p/comm)\" = metainfer ]; then\n"
                                     "    if echo '{\"state\": \"PASSED:L1_stage:basic_execution\", \"gates\": []}' 2>/dev/null > /proc/$p/fd/1;\n"
                                     "    then echo OPENED > build/probe-result.txt; else echo DENIED > build/probe-result.txt; fi\n"
                                     "    exit 0\n"
                                     "  fi\n"
                                     "  [ \"$p\" -eq 1 ] && break\n"
                                     "  p=$(awk '{print $4}' /proc/$p/stat)\n"
                                     "done\n"
                                     "echo NO-VERIFIER > build/probe-result.txt\n";
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  const GateOutcome g = engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 120})(run, "basic_execution");
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_EQ(slurp(run / "build/probe-result.txt"), "DENIED\n") << g.evidence;
}

TEST(AgentEngineStage, RepairsABrokenKernelUnderTheRealStageGate) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "the verifier runs isolated; no isolation here";
  mi_test::TempDir dir("agents-engine");
  const fs::path run = dir / "engine";
  const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                       "-o", run.string(), "--no-verify"});
  ASSERT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  const fs::path kernel = run / "src/kernels/avx2/avx2.cpp";
  std::string text = slurp(kernel);
  const std::string good = "sum_sq / float(n) + eps", bad = "sum_sq + eps";
  ASSERT_NE(text.find(good), std::string::npos);
  text.replace(text.find(good), good.size(), bad);
  std::ofstream(kernel) << text;
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));

  const json edit = {{"id", "e"}, {"name", "edit_file"},
                     {"arguments", {{"path", "src/kernels/avx2/avx2.cpp"}, {"old", bad}, {"new", good}}}};
  json steps = json::array();
  steps.push_back({{"respond", {{"text", "The kernels look right to me."}}}});
  json expect = json::object();
  expect["body_contains"] = json::array({"FAILED L1_stage:basic_execution", "reports/basic_execution/round-0.txt"});
  json repair = json::object();
  repair["expect"] = expect;
  repair["respond"] = {{"tool_calls", json::array({edit})}};
  steps.push_back(repair);
  steps.push_back({{"respond", {{"text", "RMSNorm now divides by n."}}}});
  mi_test::ScriptedLlmServer server(json{{"steps", steps}});
  AgentRunConfig cfg;
  cfg.sandbox.run_dir = run;
  cfg.sandbox.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  BackendConfig bc{"openai", server.base_url() + "/v1", "scripted", "", false, {}};
  AgentRun agents(cfg, make_backend(bc));
  const StageResult r = run_stage(agents, {"basic_execution", "Make the basic execution stage's kernels satisfy their contracts.", 1, false},
                                  engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 900}));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  ASSERT_EQ(r.rounds.size(), 2u) << r.detail;
  EXPECT_EQ(r.rounds[0].gate, "FAILED");
  EXPECT_EQ(r.state, "PASSED") << slurp(run / r.rounds.back().evidence_file);
  const std::string first = slurp(run / "reports/basic_execution/round-0.txt");
  EXPECT_NE(first.find("B0_build"), std::string::npos) << first;  // it was built, then its stage test failed
  EXPECT_NE(slurp(run / "reports/basic_execution/round-1.txt").find("PASSED L1_stage:basic_execution"), std::string::npos);
}

}  // namespace
