// `metainfer generate --backend agents` end to end on the tiny golden checkpoint, against the scripted endpoint over
// real HTTP on loopback, with the real gates. Each stage starts with its own source files withheld, so the scripted
// implementers write them (the contents the knowledge generator gives them, read from a reference engine laid down
// by the test), and in the first round of basic_execution with RMSNorm broken the way failure mode BUG-005-1 broke
// one (the sum of squares instead of their mean): the L1 stage gate fails, the spec reviewer's report and the gate's
// evidence reach the second round, the repair passes, the later stages pass (each gate rerunning the earlier stages),
// and the final gates accept the agent-written engine at PASS_VERIFIED. The orchestrator writes the strategy first and
// the experiment summariser the report last. A silent implementer fails its stage: the draft is not handed over.
// Then an agent-written engine that emits wrong tokens, built by the same final gates, fails acceptance, and so do one
// laid down for a context too short for the golden prompts and one whose plan was rewritten.
// Slow: the first test builds the engine five times (four stage gates and the final gates; about a minute each on
// two cores with a warm ccache), the second tries once (the build fails early), the third once, the fourth twice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>

#include "../toolkit_support.h"
#include "agents/agent_run.h"
#include "agents/engine_gate.h"
#include "agents/engine_generation.h"
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

using agents_test::step;
using agents_test::text;
json tool(json c) { return {{"tool_calls", json::array({std::move(c)})}}; }

// A reference engine (generate --no-verify: laid down, not built) and the files of each of its stages.
struct Reference {
  fs::path dir;
  std::map<std::string, std::vector<std::string>> files;
  explicit Reference(const fs::path& d) : dir(d) {
    const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                         "-o", dir.string(), "--no-verify"});
    EXPECT_EQ(gen.exit_code, 0) << gen.out << gen.err;
    for (const auto& b : engine_stage_briefs(mi::ckb::load(fs::path(METAINFER_SOURCE_DIR) / "ckb"), dir)) files[b.stage] = b.files;
  }
  // One response writing every file of `stage`, each file's text passed through `edit`.
  json write_stage(const std::string& stage, const std::function<std::string(const std::string&, std::string)>& edit = {}) const {
    json calls = json::array();
    for (const auto& f : files.at(stage)) {
      std::string content = slurp(dir / f);
      if (edit) content = edit(f, content);
      calls.push_back(call("w" + std::to_string(calls.size()), "write_file", {{"path", f}, {"content", content}}));
    }
    return {{"tool_calls", calls}};
  }
};

TEST(AgentGenerate, StagesWrittenByTheImplementersAreRepairedAndAcceptedByTheRealGates) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the stage gates run under bubblewrap; not available here";
  mi_test::TempDir dir("agents-generate");
  const fs::path engine = dir / "engine";
  const Reference ref(dir / "reference");
  const std::string kernel = "src/kernels/avx2/avx2.cpp";
  const std::string good = "sum_sq / float(n) + eps", bad = "sum_sq + eps";
  ASSERT_NE(slurp(ref.dir / kernel).find(good), std::string::npos);
  const auto broken_rmsnorm = [&](const std::string& f, std::string t) {
    if (f == kernel) t.replace(t.find(good), good.size(), bad);
    return t;
  };
  json steps = json::array({
      // The orchestrator reads the stage list and writes the strategy every implementer is pointed at.
      step(tool(call("s", "write_file", {{"path", "strategy/strategy.md"}, {"content", "Regular generation: basic_execution, then "
                                                                                      "model_components, then framework_integration.\n"}})),
           {{"system_contains", "main agent"}, {"body_contains", {"plan.json", "basic_execution", kernel}}}),
      step(text("Strategy written.")),
      // basic_execution, round 0: its sources are withheld; the implementer writes them, RMSNorm "simplified" and
      // broken; the reviewer notices.
      step(ref.write_stage("basic_execution", broken_rmsnorm),
           {{"system_contains", "implementation agent"},
            {"body_contains", {"tests/stage_basic_execution_test.cpp", "kernels (@ckb/contracts/kernels.toml)", kernel,
                               "NOT in the engine directory", "strategy/strategy.md"}}}),
      step(text("Wrote the basic execution sources.")),
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
      // model_components and framework_integration: their sources are withheld in turn and written.
      step(ref.write_stage("model_components"), {{"body_contains", {"stage 'model_components'", "src/model.h", "NOT in the engine directory"}}}),
      step(text("The model components follow their contracts.")),
      step(text("No findings.")),
      step(ref.write_stage("framework_integration"), {{"body_contains", {"stage 'framework_integration'", "src/engine_config.h"}}}),
      step(text("The framework components follow their contracts.")),
      step(text("No findings.")),
      // The experiment summariser writes the run's report from the figures the workflow measured.
      step(tool(call("x", "write_file", {{"path", "experiment/summary.md"}, {"content", "Accepted after one repair of RMSNorm.\n"}})),
           {{"system_contains", "experiment-summary agent"},
            {"body_contains", {"PASS_VERIFIED", "Figures measured by the workflow", "round 0 FAILED"}}}),
      step(text("Report written.")),
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
  EXPECT_EQ(last["strategy"], (engine / "strategy/strategy.md").string());
  EXPECT_EQ(last["experiment_summary"], (engine / "experiment/summary.md").string());

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

  // The workflow's records: ten conversations (the orchestrator, implementer and reviewer per round, the summariser),
  // every source file of the three stages counted as an edit, transcripts, the summary.
  const json metrics = json::parse(slurp(engine / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 10) << metrics.dump(2);
  EXPECT_EQ(metrics["totals"]["violations"], 0);
  std::size_t written = 0;
  for (const auto& [stage, files] : ref.files) written += files.size();
  EXPECT_EQ(metrics["totals"]["edits"], int(written) + 4) << metrics["totals"].dump();  // + strategy, review, repair, report
  EXPECT_TRUE(fs::exists(engine / "transcripts/basic_execution-r1-implementer.jsonl"));
  EXPECT_TRUE(fs::exists(engine / "summary.md"));
  // The README's second excerpt is the repairing implementer's transcript: METAINFER_KEEP_TRANSCRIPTS=DIR keeps a copy.
  if (const char* keep = std::getenv("METAINFER_KEEP_TRANSCRIPTS"))
    fs::copy_file(engine / "transcripts/basic_execution-r1-implementer.jsonl",
                  fs::path(keep) / "AgentGenerate.StagesWrittenByTheImplementersAreRepairedAndAcceptedByTheRealGates.jsonl",
                  fs::copy_options::overwrite_existing);
  const json generation = json::parse(slurp(engine / ".metainfer/generation.json"));
  EXPECT_EQ(generation["state"], "PASS_VERIFIED");
  EXPECT_EQ(generation["experiment_summary"], "experiment/summary.md");
  EXPECT_EQ(slurp(engine / "experiment/summary.md"), "Accepted after one repair of RMSNorm.\n");
}

// The draft is not handed over: an implementer that writes nothing leaves its stage's sources missing, and the real
// stage gate fails it (the build cannot even start). Nothing after the failed stage runs but the summariser.
TEST(AgentGenerate, ASilentImplementerFailsTheStage) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the stage gates run under bubblewrap; not available here";
  mi_test::TempDir dir("agents-generate-silent");
  const fs::path engine = dir / "engine";
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      step(text("Nothing to plan."), {{"system_contains", "main agent"}}),
      step(text("The sources are fine as they are."), {{"system_contains", "implementation agent"}}),
      step(text("Nothing to report."), {{"system_contains", "experiment-summary agent"},
                                        {"body_contains", {"FAILED:basic_execution", "round 0 FAILED"}}}),
  })}});
  const auto r = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "-o",
                                     engine.string(), "--backend", "agents", "--max-repair-rounds", "0", "--no-review", "--llm-url",
                                     server.base_url() + "/v1", "--llm-model", "scripted", "--json"},
                                    900);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json last = mi_test::last_json_line(r.out);
  EXPECT_EQ(last["state"], "FAILED:basic_execution") << last.dump(2);
  ASSERT_EQ(last["stages"].size(), 1u);
  ASSERT_EQ(last["stages"][0]["rounds"].size(), 1u);
  EXPECT_EQ(last["stages"][0]["rounds"][0]["gate"], "FAILED");
  EXPECT_TRUE(last["final_gates"].is_null());
  EXPECT_TRUE(last["strategy"].is_null());
  const std::string evidence = slurp(engine / "reports/basic_execution/round-0.txt");
  EXPECT_NE(evidence.find("FAILED B0_build"), std::string::npos) << evidence;
  EXPECT_EQ(evidence.find("PASSED L1_stage"), std::string::npos) << evidence;
  EXPECT_FALSE(fs::exists(engine / "src/kernels/avx2/avx2.cpp"));  // withheld, never written
  EXPECT_TRUE(fs::exists(engine / "src/model.h"));                  // a later stage's draft: B0 needs it
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
      step(tool(call("e", "edit_file", {{"path", "src/engine/generation.cpp"}, {"old", from}, {"new", to}}))),
      step(text("Fixed the sampled id.")),
  })}});
  AgentRunConfig cfg;
  cfg.sandbox.run_dir = engine;
  cfg.sandbox.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  AgentRun run(cfg, make_backend({"openai", server.base_url() + "/v1", "scripted", "", false, {}}));
  run.converse("implementer", "Stage 'framework_integration': check the generation loop.");
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  ASSERT_NE(slurp(engine / "src/engine/generation.cpp").find(to), std::string::npos);
  const FinalGatesOutcome f = engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800}, engine, 2);
  EXPECT_FALSE(f.passed);
  EXPECT_EQ(f.state, "FAILED:PASS_VERIFIED") << f.evidence;
  EXPECT_TRUE(f.acceptance.empty());
  EXPECT_NE(f.evidence.find("PASSED B0_build"), std::string::npos) << f.evidence;  // it was built and ran
  // Built in the isolation of agents' commands; the host only hashed that build before running the binary.
  EXPECT_NE(f.evidence.find("confined build: verification state: PASSED:B0_build"), std::string::npos) << f.evidence;
  EXPECT_NE(f.evidence.find("as the confined build left it (not built here)"), std::string::npos) << f.evidence;
}

// The final gates judge an agent-written engine on every prompt, with the plan the generator wrote: an engine laid
// down for a context too short for the golden prompts fails acceptance (the knowledge backend's engines may skip
// those prompts; agent-written sources may not), and a plan rewritten to a context that would hold them (as agent code
// run by a gate once could) is no plan: it must match the sha256 MANIFEST.json lists for it.
TEST(AgentGenerate, TheFinalGatesRefuseAShortContextAndARewrittenPlan) {
  mi_test::TempDir dir("agents-final-plan");
  const fs::path engine = dir / "engine";
  const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                       "--max-context", "64", "-o", engine.string(), "--no-verify"});
  ASSERT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  const FinalGatesOutcome short_context = engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800}, engine, 2);
  EXPECT_FALSE(short_context.passed);
  EXPECT_EQ(short_context.state, "FAILED:PASS_VERIFIED") << short_context.evidence;
  EXPECT_NE(short_context.evidence.find("max_context 64 cannot hold the prompts acceptance judges"), std::string::npos) << short_context.evidence;

  std::string plan = slurp(engine / "plan.json");
  const std::string from = "\"max_context\": 64", to = "\"max_context\": 512";
  ASSERT_NE(plan.find(from), std::string::npos) << plan;
  plan.replace(plan.find(from), from.size(), to);
  std::ofstream(engine / "plan.json") << plan;
  const FinalGatesOutcome rewritten = engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800}, engine, 2);
  EXPECT_FALSE(rewritten.passed);
  EXPECT_EQ(rewritten.state, "FAILED:PASS_VERIFIED") << rewritten.evidence;
  EXPECT_NE(rewritten.evidence.find("the plan was changed after the generator wrote it"), std::string::npos) << rewritten.evidence;
}

}  // namespace
