// `metainfer generate --backend agents` end to end on the tiny golden checkpoint, against the scripted endpoint over
// real HTTP on loopback, with the real gates: the scripted implementer breaks RMSNorm in the first round (the way
// failure mode BUG-005-1 broke one: the sum of squares instead of their mean), the L1 stage gate fails, the spec
// reviewer's report and the gate's evidence reach the second round, the repair passes, the later stages pass (each
// gate rerunning the earlier stages), and the final gates accept the agent-written engine at PASS_VERIFIED.
// Then an agent-written engine that emits wrong tokens, built by the same final gates, fails acceptance.
// Slow: the first test builds the engine five times (four stage gates and the final gates; about a minute each on
// two cores with a warm ccache), the second once.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/agent_run.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;

json step(json respond, json expect = json::object()) {
  json s = {{"respond", std::move(respond)}};
  if (!expect.empty()) s["expect"] = std::move(expect);
  return s;
}
json text(const std::string& t) { return {{"text", t}}; }
json tool(json c) { return {{"tool_calls", json::array({std::move(c)})}}; }

TEST(AgentGenerate, StageRepairedAfterOneRoundThenTheFinalGatesAcceptTheEngine) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the stage gates run under bubblewrap; not available here";
  mi_test::TempDir dir("agents-generate");
  const fs::path engine = dir / "engine";
  const std::string kernel = "src/kernels/avx2/avx2.cpp";
  const std::string good = "sum_sq / float(n) + eps", bad = "sum_sq + eps";
  json steps = json::array({
      // basic_execution, round 0: the implementer "simplifies" RMSNorm and breaks it; the reviewer notices.
      step(tool(call("e0", "edit_file", {{"path", kernel}, {"old", good}, {"new", bad}})),
           {{"system_contains", "implementation agent"}, {"body_contains", {"tests/stage_basic_execution_test.cpp", "kernels (@ckb/contracts/kernels.toml)", kernel}}}),
      step(text("Simplified the RMSNorm normalisation.")),
      step(tool(call("r0", "write_file", {{"path", "review/basic_execution-r0.md"},
                                          {"content", "rmsnorm contract: divide the sum of squares by n (mean). " + kernel + " does not.\n"}})),
           {{"system_contains", "specification-review agent"}}),
      step(text("Review written.")),
      // round 1: the gate's evidence and the review are in the task; the implementer repairs.
      step(tool(call("e1", "edit_file", {{"path", kernel}, {"old", bad}, {"new", good}})),
           {{"system_contains", "implementation agent"},
            {"body_contains", {"FAILED L1_stage:basic_execution", "reports/basic_execution/round-0.txt", "review/basic_execution-r0.md"}}}),
      step(text("RMSNorm divides by n again.")),
      step(text("No findings."), {{"system_contains", "specification-review agent"}}),
      // model_components and framework_integration: the draft satisfies them.
      step(text("The model components follow their contracts."), {{"body_contains", {"stage 'model_components'"}}}),
      step(text("No findings.")),
      step(text("The framework components follow their contracts."), {{"body_contains", {"stage 'framework_integration'"}}}),
      step(text("No findings.")),
  });
  mi_test::ScriptedLlmServer server(json{{"steps", steps}});
  const auto r = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "-o",
                                     engine.string(), "--backend", "agents", "--max-repair-rounds", "1", "--llm-url",
                                     server.base_url() + "/v1", "--llm-model", "scripted", "--json"},
                                    3000);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << slurp(engine / "reports/agents/final_gates.txt");
  const json last = mi_test::last_json_line(r.out);
  EXPECT_EQ(last["backend"], "agents");
  EXPECT_EQ(last["state"], "PASS_VERIFIED") << last.dump(2);
  ASSERT_EQ(last["stages"].size(), 3u);
  EXPECT_EQ(last["stages"][0]["stage"], "basic_execution");
  ASSERT_EQ(last["stages"][0]["rounds"].size(), 2u);
  EXPECT_EQ(last["stages"][0]["rounds"][0]["gate"], "FAILED");
  EXPECT_EQ(last["stages"][0]["rounds"][1]["gate"], "PASSED");
  for (int i : {1, 2}) EXPECT_EQ(last["stages"][i]["rounds"].size(), 1u) << last["stages"][i].dump();
  EXPECT_EQ(last["final_gates"]["state"], "PASSED:L0_provenance,PASS_VERIFIED,L3");

  // The first round was built and its stage test failed; the last stage's gate reran every stage on the final sources.
  const std::string first = slurp(engine / "reports/basic_execution/round-0.txt");
  EXPECT_NE(first.find("PASSED B0_build"), std::string::npos) << first;
  EXPECT_NE(first.find("FAILED L1_stage:basic_execution"), std::string::npos) << first;
  const std::string last_stage = slurp(engine / "reports/framework_integration/round-0.txt");
  for (const char* s : {"basic_execution", "model_components", "framework_integration"})
    EXPECT_NE(last_stage.find(std::string("PASSED L1_stage:") + s), std::string::npos) << last_stage;
  // The final gates ran on what the agents wrote: acceptance on the golden trace, and L3.
  const json report = json::parse(slurp(engine / "reports/verification.json"));
  EXPECT_EQ(report["state"], "PASSED:L0_provenance,PASS_VERIFIED,L3");
  bool accepted = false;
  for (const auto& g : report["gates"]) accepted = accepted || (g["id"] == "PASS_VERIFIED" && g["passed"] == true);
  EXPECT_TRUE(accepted) << report.dump(2);
  EXPECT_NE(slurp(engine / kernel).find(good), std::string::npos);

  // The workflow's records: eight conversations (implementer and reviewer per round), transcripts, the summary.
  const json metrics = json::parse(slurp(engine / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 8) << metrics.dump(2);
  EXPECT_EQ(metrics["totals"]["violations"], 0);
  EXPECT_TRUE(fs::exists(engine / "transcripts/basic_execution-r1-implementer.jsonl"));
  EXPECT_TRUE(fs::exists(engine / "summary.md"));
  const json generation = json::parse(slurp(engine / ".metainfer/generation.json"));
  EXPECT_EQ(generation["state"], "PASS_VERIFIED");
  EXPECT_NE(slurp(engine / "strategy/strategy.md").find("framework_integration"), std::string::npos);
}

TEST(AgentGenerate, AgentWrittenEngineEmittingWrongTokensFailsAcceptance) {
  mi_test::TempDir dir("agents-generate-wrong");
  const fs::path engine = dir / "engine";
  const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                       "-o", engine.string(), "--no-verify"});
  ASSERT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  write_protected_manifest(protected_manifest_path(engine), snapshot_protected(engine, default_protected_globs()));
  // The implementer "fixes" an off-by-one that is not there: every sampled id is shifted by one. No stage test looks
  // at the engine's generation loop; acceptance, which compares the engine's greedy ids with the trace, must.
  const std::string from = "const int32_t token = sampler.sample(logits, history);";
  const std::string to = "const int32_t token = (sampler.sample(logits, history) + 1) % int32_t(logits.size());";
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      step(tool(call("e", "edit_file", {{"path", "src/engine/generation.h"}, {"old", from}, {"new", to}}))),
      step(text("Fixed the sampled id.")),
  })}});
  AgentRunConfig cfg;
  cfg.sandbox.run_dir = engine;
  cfg.sandbox.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  AgentRun run(cfg, make_backend({"openai", server.base_url() + "/v1", "scripted", "", false, {}}));
  run.converse("implementer", "Stage 'framework_integration': check the generation loop.");
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  ASSERT_NE(slurp(engine / "src/engine/generation.h").find(to), std::string::npos);
  const FinalGatesOutcome f = engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800}, engine, 2);
  EXPECT_FALSE(f.passed);
  EXPECT_EQ(f.state, "FAILED:PASS_VERIFIED") << f.evidence;
  EXPECT_TRUE(f.acceptance.empty());
  EXPECT_NE(f.evidence.find("PASSED B0_build"), std::string::npos) << f.evidence;  // it was built and ran
}

}  // namespace
