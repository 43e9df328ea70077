// A generation stage run by LLM agents against the scripted endpoint, judged by a protected gate script: a pass
// after one repair round with the failure evidence fed back, tampering caught before the gate, bounded rounds.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "../toolkit_support.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

using agents_test::call;
using agents_test::slurp;
using agents_test::write;

const char* kGate = R"SH(if grep -q "return 2;" src/kernel.cpp 2>/dev/null; then echo "PASS"; exit 0; fi
echo "FAIL: scale() must return 2; src/kernel.cpp is:"
cat src/kernel.cpp 2>/dev/null || echo "(missing)"
exit 1
)SH";

// A run directory with a protected test contract and gate script, hashed as the workflow does when it lays them down.
struct StageWorld {
  mi_test::TempDir dir{"agents-stage"};
  fs::path run = dir / "run";
  StageWorld() {
    write(run / "gates/kernel.sh", kGate);
    write(run / "tests/kernel_contract.txt", "scale() returns 2\n");
    write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  }
  AgentRun make_run(const mi_test::ScriptedLlmServer& server) const { return agents_test::scripted_run(run, server); }
};

TEST(AgentStage, PassesAfterOneRepairRoundWithTheEvidenceFedBack) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  StageWorld w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"body_contains", {"Stage 'kernel', round 0", "Make scale() return 2"}}, {"system_contains", "implementation agent"}}},
       {"respond", {{"tool_calls", {call("w", "write_file", {{"path", "src/kernel.cpp"}, {"content", "int scale() { return 1; }\n"}})}}, {"usage", {{"input", 50}, {"output", 30}}}}}},
      {{"respond", {{"text", "Implemented scale()."}, {"usage", {{"input", 60}, {"output", 5}}}}}},
      // Round 1 is a fresh conversation whose task carries the gate's evidence.
      {{"expect", {{"last", "user"}, {"body_contains", {"round 1", "FAIL: scale() must return 2", "reports/kernel/round-0.txt", "return 1;"}}}},
       {"respond", {{"tool_calls", {call("e", "edit_file", {{"path", "src/kernel.cpp"}, {"old", "return 1;"}, {"new", "return 2;"}})}}, {"usage", {{"input", 70}, {"output", 20}}}}}},
      {{"respond", {{"text", "Fixed the constant."}, {"usage", {{"input", 80}, {"output", 5}}}}}},
  })}});
  AgentRun run = w.make_run(server);
  const StageResult r = run_stage(run, {"kernel", "Make scale() return 2 in src/kernel.cpp.", 2, false}, script_gate(30));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "PASSED") << r.detail;
  ASSERT_EQ(r.rounds.size(), 2u);
  EXPECT_EQ(r.rounds[0].gate, "FAILED");
  EXPECT_EQ(r.rounds[1].gate, "PASSED");
  EXPECT_EQ(r.rounds[1].implementer, "kernel-r1-implementer");
  EXPECT_NE(slurp(w.run / "reports/kernel/round-0.txt").find("exit status 1"), std::string::npos);
  EXPECT_NE(slurp(w.run / "reports/kernel/round-1.txt").find("PASS"), std::string::npos);
  const json record = json::parse(slurp(w.run / ".metainfer/stages/kernel.json"));
  EXPECT_EQ(record["state"], "PASSED");
  const json metrics = json::parse(slurp(w.run / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 2);
  EXPECT_EQ(metrics["totals"]["edits"], 2);
  EXPECT_EQ(metrics["totals"]["tokens_in"], 260);
  EXPECT_EQ(metrics["totals"]["violations"], 0);
  EXPECT_TRUE(fs::exists(w.run / "transcripts/kernel-r0-implementer.jsonl"));
  EXPECT_TRUE(fs::exists(w.run / "summary.md"));
}

// Through its shell the implementer tries to weaken the contract, add one, and plant a link among them: the sandbox
// undoes each change and counts it, so the gate judges the contracts as they were laid down.
TEST(AgentStage, ImplementerTamperingThroughItsShellIsUndoneAndCounted) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "run_command needs isolation";
  StageWorld w;
  // The gate leaves a mark in its build tree, the one place a gate may write (gate_watch.h).
  write(w.run / "gates/kernel.sh", std::string("mkdir -p build && touch build/gate-ran\n") + kGate);
  write_protected_manifest(protected_manifest_path(w.run), snapshot_protected(w.run, default_protected_globs()));
  const std::string tamper =
      "echo 'anything goes' > tests/kernel_contract.txt; mkdir -p test_contracts && echo weakened > test_contracts/kernel.toml; "
      "ln -s ../gates/kernel.sh test_contracts/link.toml";
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("t", "run_command", {{"command", tamper}})}}}}},
      {{"respond", {{"text", "Done."}}}},
  })}});
  AgentRun run = w.make_run(server);
  const StageResult r = run_stage(run, {"kernel", "Make scale() return 2.", 0, false}, script_gate(30));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "FAILED") << r.detail;  // judged, on untouched contracts: src/kernel.cpp was never written
  ASSERT_EQ(r.rounds.size(), 1u);
  EXPECT_EQ(r.rounds[0].gate, "FAILED");
  EXPECT_TRUE(fs::exists(w.run / "build/gate-ran"));
  EXPECT_EQ(slurp(w.run / "tests/kernel_contract.txt"), "scale() returns 2\n");
  EXPECT_FALSE(fs::exists(w.run / "test_contracts/kernel.toml"));
  EXPECT_FALSE(fs::is_symlink(w.run / "test_contracts/link.toml"));
  std::set<std::string> undone;
  for (const auto& v : run.sandbox().violations()) {
    EXPECT_EQ(v.rule, "protected_path");
    undone.insert(v.path);
  }
  EXPECT_TRUE(undone.count("test_contracts/kernel.toml"));
  EXPECT_TRUE(undone.count("test_contracts/link.toml"));
  EXPECT_EQ(json::parse(slurp(w.run / "metrics.json"))["totals"]["violations"], undone.size());
}

// A change to the contracts that bypassed the sandbox altogether (planted here by the test's own gate after round 0,
// as a build step or a sandbox bug might) is caught by the hash check before the next gate runs.
TEST(AgentStage, AProtectedFileChangedOutsideTheSandboxIsCaughtBeforeTheGate) {
  StageWorld w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"text", "Nothing to do."}}}},
      {{"respond", {{"text", "Still nothing."}}}},
  })}});
  AgentRun run = w.make_run(server);
  int gate_runs = 0;
  const GateRunner planting_gate = [&](const fs::path& run_dir, const std::string&) {
    ++gate_runs;
    write(run_dir / "test_contracts/kernel.toml", "weakened\n");
    return GateOutcome{false, "FAIL"};
  };
  const StageResult r = run_stage(run, {"kernel", "Make scale() return 2.", 2, false}, planting_gate);
  EXPECT_EQ(r.state, "TAMPERED");
  EXPECT_NE(r.detail.find("added test_contracts/kernel.toml"), std::string::npos) << r.detail;
  ASSERT_EQ(r.rounds.size(), 2u);
  EXPECT_EQ(r.rounds[1].gate, "TAMPERED");
  EXPECT_EQ(gate_runs, 1);  // the second gate never ran
}

TEST(AgentStage, FailsAfterTheLastRepairRoundAndPassesTheReviewOn) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  StageWorld w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"text", "I believe it is already correct."}}}},
      {{"expect", {{"system_contains", "specification-review agent"}, {"tools", {"list_dir", "read_file", "search_ckb", "write_file"}},
                   {"body_contains", {"Write your findings to review/kernel-r0.md"}}}},  // the prompt defers to this path
       {"respond", {{"tool_calls", {call("r", "write_file", {{"path", "review/kernel-r0.md"}, {"content", "src/kernel.cpp is missing.\n"}})}}}}},
      {{"respond", {{"text", "Review written."}}}},
      {{"expect", {{"body_contains", {"review/kernel-r0.md", "(missing)"}}}}, {"respond", {{"text", "Still nothing to do."}}}},
      {{"respond", {{"text", "No findings."}}}},
  })}});
  AgentRun run = w.make_run(server);
  const StageResult r = run_stage(run, {"kernel", "Make scale() return 2.", 1, true}, script_gate(30));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(r.state, "FAILED");
  ASSERT_EQ(r.rounds.size(), 2u);
  EXPECT_EQ(r.rounds[0].reviewer, "kernel-r0-reviewer");
  EXPECT_EQ(json::parse(slurp(w.run / "metrics.json"))["totals"]["agents_started"], 4);
}

// A session stops in round 1 (the endpoint fails): the next session in the same run directory continues at round 1
// with round 0's evidence, and the rounds the gate judged stay spent; a stage whose verdict is in never runs again.
TEST(AgentStage, AStoppedStageResumesWithItsJudgedRoundsSpent) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  StageWorld w;
  const StageSpec spec{"kernel", "Make scale() return 2 in src/kernel.cpp.", 1, false};
  {
    // Round 0 fails the gate; round 1's first request finds the script spent (the endpoint answers 500).
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        {{"respond", {{"tool_calls", {call("w", "write_file", {{"path", "src/kernel.cpp"}, {"content", "int scale() { return 1; }\n"}})}}}}},
        {{"respond", {{"text", "Implemented."}}}},
    })}});
    AgentRun run = w.make_run(server);
    const StageResult r = run_stage(run, spec, script_gate(30));
    EXPECT_EQ(r.state, "AGENT_ERROR") << r.detail;
    ASSERT_EQ(r.rounds.size(), 2u);
    EXPECT_EQ(r.rounds[1].gate, "NOT_RUN");
  }
  {
    // Resumed: the first request is round 1's, with round 0's verdict; the fix passes the gate.
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        {{"expect", {{"body_contains", {"Stage 'kernel', round 1", "FAIL: scale() must return 2", "reports/kernel/round-0.txt"}}}},
         {"respond", {{"tool_calls", {call("e", "edit_file", {{"path", "src/kernel.cpp"}, {"old", "return 1;"}, {"new", "return 3;"}})}}}}},
        {{"respond", {{"text", "Fixed."}}}},
    })}});
    AgentRun run = w.make_run(server);
    const StageResult r = run_stage(run, spec, script_gate(30));
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    EXPECT_EQ(server.steps_left(), 0u);
    // return 3 fails too, and with max_repair_rounds 1 that was the last round: FAILED after two judged rounds.
    EXPECT_EQ(r.state, "FAILED") << r.detail;
    ASSERT_EQ(r.rounds.size(), 2u);
    EXPECT_EQ(r.rounds[0].gate, "FAILED");
    EXPECT_EQ(r.rounds[1].round, 1);
    EXPECT_EQ(r.rounds[1].gate, "FAILED");
  }
  {
    // A third session asks the endpoint nothing: the verdict stands and no round is added.
    mi_test::ScriptedLlmServer server(json{{"steps", json::array()}});
    AgentRun run = w.make_run(server);
    const StageResult r = run_stage(run, spec, script_gate(30));
    EXPECT_EQ(r.state, "FAILED");
    EXPECT_EQ(r.rounds.size(), 2u);
    EXPECT_TRUE(server.requests().empty());
  }
  // A record that is not this stage's is refused, not silently restarted.
  write(w.run / ".metainfer/stages/kernel.json", "{\"stage\": \"other\"}\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array()}});
  AgentRun run = w.make_run(server);
  EXPECT_THROW(run_stage(run, spec, script_gate(30)), mi::Error);
}

// A gate whose output quotes foreign source (here a script assembling a vLLM import line at run time, as a compiler
// error quoting an #include'd modeling file would) hands the implementer none of it: the evidence is withheld, the
// round fails whatever the exit status, and a foreign_signature violation is counted.
TEST(AgentStage, GateEvidenceCarryingAForeignSignatureIsWithheld) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  StageWorld w;
  // As a compiler quotes a line: prefixed with its number, so the line-start marker is not at a line's start.
  write(w.run / "gates/kernel.sh", "printf '%s%s\\n' '    3 | from vl' 'lm import LLM  # quoted by the gate'\nexit 0\n");
  write_protected_manifest(protected_manifest_path(w.run), snapshot_protected(w.run, default_protected_globs()));
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"text", "Nothing to change."}}}},
      {{"expect", {{"body_contains", {"round 1", "gate evidence withheld (foreign_signature)"}}}}, {"respond", {{"text", "Understood."}}}},
  })}});
  AgentRun run = w.make_run(server);
  const StageResult r = run_stage(run, {"kernel", "Make scale() return 2.", 1, false}, script_gate(30));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "FAILED");
  ASSERT_EQ(r.rounds.size(), 2u);
  EXPECT_EQ(r.rounds[0].gate, "FAILED");  // exit status 0, but the evidence could not be handed over
  const std::string evidence = slurp(w.run / "reports/kernel/round-0.txt");
  EXPECT_EQ(evidence.find("lm import LLM"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("withheld"), std::string::npos) << evidence;
  EXPECT_EQ(json::parse(slurp(w.run / "metrics.json"))["totals"]["violations"], 2);
}

}  // namespace
