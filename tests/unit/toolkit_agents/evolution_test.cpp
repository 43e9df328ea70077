// Knowledge-base evolution rounds against the scripted endpoint: the delta reaches the CKB only after the SWITCH=OFF
// regeneration from the staged CKB passes its gate; a failure is analysed and seeds the next round; an interrupted
// evolution resumes at the phase it stopped in.
#include <gtest/gtest.h>

#include <fstream>

#include "../toolkit_support.h"
#include "agents/ckb_delta.h"
#include "agents/evolution.h"
#include "agents/isolated_command.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

using agents_test::call;
using agents_test::slurp;
using agents_test::write;
json tool_step(json expect, const std::string& name, json args) {
  return {{"expect", std::move(expect)}, {"respond", {{"tool_calls", {call("c", name, std::move(args))}}, {"usage", {{"input", 10}, {"output", 5}}}}}};
}
json text_step(const std::string& text) { return {{"respond", {{"text", text}, {"usage", {{"input", 10}, {"output", 2}}}}}}; }

// Steps of the phases, as the round's conversations will ask for them. The orchestrator writes the round's strategy
// (from the second round on, it is told to update the previous one).
std::vector<json> strategy(const std::string& text = "Round plan: learn scale(), then write it.", bool update = false) {
  json expect = {{"system_contains", "main agent"}, {"body_contains", json::array({"Knowledge-base evolution", "scale"})}};
  expect["body_contains"].push_back(update ? "previous round's strategy" : "Write the strategy to strategy/strategy.md");
  return {tool_step(expect, "write_file", {{"path", "strategy/strategy.md"}, {"content", text + "\n"}}), text_step("Strategy written.")};
}
// The experiment summariser: its task carries the outcome and the measured figures. With `forge`, it first tries to
// rewrite the measured metrics, which the sandbox refuses (a workflow record).
std::vector<json> summary(const std::string& outcome_expected, bool forge = false) {
  std::vector<json> steps;
  json expect = {{"system_contains", "experiment-summary agent"},
                 {"body_contains", {outcome_expected, "Figures measured by the workflow", "agents started"}}};
  if (forge) {
    steps.push_back(tool_step(expect, "write_file", {{"path", "metrics.json"}, {"content", "{\"agents_started\": 1}\n"}}));
    expect = {{"body_contains", {"protected"}}};
  }
  steps.push_back(tool_step(expect, "write_file", {{"path", "experiment/summary.md"}, {"content", "# Summary\n" + outcome_expected + "\n"}}));
  steps.push_back(text_step("Report written."));
  return steps;
}
std::vector<json> explore_and_consolidate(const std::string& seed_expected = "") {
  json explorer_expect = {{"system_contains", "exploration agent"}, {"body_contains", json::array({"Target:", "scale", "strategy/strategy.md"})}};
  if (!seed_expected.empty()) explorer_expect["body_contains"].push_back(seed_expected);
  return {tool_step(explorer_expect, "write_file", {{"path", "exploration/notes.md"}, {"content", "scale() must return 2 (model card).\n"}}),
          text_step("Notes written."),
          tool_step({{"system_contains", "knowledge-consolidation agent"}, {"body_contains", {"exploration/notes.md", "strategy/strategy.md"}}}, "write_file",
                    {{"path", "ckb_delta/experience/scale.md"}, {"content", "# scale\nscale() returns 2.\n"}}),
          text_step("Delta staged.")};
}
std::vector<json> candidate_writes(const std::string& value) {
  return {tool_step({{"system_contains", "implementation agent"}, {"body_contains", {"exploration/notes.md", "strategy/strategy.md"}}}, "write_file",
                    {{"path", "src/scale.txt"}, {"content", value + "\n"}}),
          text_step("Candidate written.")};
}
// The regeneration reads the staged knowledge through @ckb: it has nothing else to go on.
std::vector<json> regeneration_writes(const std::string& value) {
  return {tool_step({{"system_contains", "implementation agent"}, {"body_contains", {"Use the knowledge base only."}}}, "read_file",
                    {{"path", "@ckb/experience/scale.md"}}),
          tool_step({{"body_contains", {"scale() returns 2."}}}, "write_file", {{"path", "src/scale.txt"}, {"content", value + "\n"}}),
          text_step("Regenerated.")};
}
std::vector<json> failure_analysis() {
  return {tool_step({{"system_contains", "failure-analysis agent"}, {"body_contains", {"failed in phase regenerate", "must hold 2"}}},
                    "write_file", {{"path", "failure/analysis.md"}, {"content", "ANALYSIS: the regeneration wrote 1.\n"}}),
          text_step("Analysis written.")};
}
json script(std::initializer_list<std::vector<json>> parts) {
  json steps = json::array();
  for (const auto& p : parts)
    for (const auto& s : p) steps.push_back(s);
  return {{"steps", steps}};
}

struct EvoWorld {
  mi_test::TempDir dir{"agents-evo"};
  fs::path ckb = dir / "ckb", contracts = dir / "contracts", work = dir / "work";
  EvoWorld() {
    fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
    write(contracts / "gates/target.sh",
          "test \"$(cat src/scale.txt 2>/dev/null)\" = 2 || { echo \"src/scale.txt must hold 2, holds: $(cat src/scale.txt 2>/dev/null)\"; exit 1; }\necho PASS\n");
    write(contracts / "tests/contract.txt", "scale() returns 2\n");
    fs::create_directories(work);
  }
  EvolutionConfig config(int max_rounds) const {
    EvolutionConfig c;
    c.work_dir = work;
    c.ckb_dir = ckb;
    c.repo_root = METAINFER_SOURCE_DIR;
    c.contracts_dir = contracts;
    c.target = "A model whose scale() is not in the knowledge base: find it and make src/scale.txt hold it.";
    c.max_rounds = max_rounds;
    c.max_repair_rounds = 0;
    c.command_timeout_s = 30;
    return c;
  }
};

BackendFactory backends(const mi_test::ScriptedLlmServer& server) {
  const std::string url = server.base_url() + "/v1";
  return [url] {
    BackendConfig bc{"openai", url, "scripted", "", false, {}};
    bc.http.timeout_s = 10;
    bc.http.retry.max_attempts = 1;  // a script that runs out is an endpoint that stopped: no waiting
    return make_backend(bc);
  };
}

#define REQUIRE_ISOLATION() \
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here"

TEST(AgentEvolution, NothingIsMergedWhenTheSwitchOffRegenerationFails) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  mi_test::ScriptedLlmServer server(script({strategy(), explore_and_consolidate(), candidate_writes("2"), regeneration_writes("1"),
                                            failure_analysis(), summary("FAILED")}));
  const EvolutionResult r = evolve(w.config(1), backends(server), script_gate(30), false);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(r.state, "FAILED") << r.detail;
  // The regeneration works from the CKB alone: the round's strategy is not in its directory nor in its task.
  EXPECT_FALSE(fs::exists(w.work / "evo-001/regen/strategy"));
  for (const auto& req : server.requests())
    if (req.body.dump().find("Use the knowledge base only.") != std::string::npos)
      EXPECT_EQ(req.body.dump().find("strategy/strategy.md"), std::string::npos);
  // The candidate passed, but the regeneration from the CKB alone did not: the CKB is untouched.
  const json round = json::parse(slurp(w.work / "evo-001/round.json"));
  EXPECT_EQ(round["state"], "FAILED:regenerate");
  EXPECT_EQ(round["candidate"]["state"], "PASSED");
  EXPECT_FALSE(fs::exists(w.ckb / "experience/scale.md"));
  EXPECT_FALSE(fs::exists(w.ckb / "evolution"));
  EXPECT_TRUE(fs::exists(w.work / "evo-001/staged_ckb/experience/scale.md"));
  // The regeneration's run directory held the contracts only: no notes, no candidate sources.
  EXPECT_FALSE(fs::exists(w.work / "evo-001/regen/exploration"));
  EXPECT_EQ(slurp(w.work / "evo-001/candidate/failure/analysis.md"), "ANALYSIS: the regeneration wrote 1.\n");
}

TEST(AgentEvolution, AFailedRoundSeedsTheNextWhichIsAbsorbedAndTagged) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  mi_test::ScriptedLlmServer server(script({strategy(), explore_and_consolidate(), candidate_writes("2"), regeneration_writes("1"), failure_analysis(),
                                            strategy("Round plan, revised: the delta must say 2 plainly.", true),
                                            explore_and_consolidate("ANALYSIS: the regeneration wrote 1."), candidate_writes("2"),
                                            regeneration_writes("2"), summary("ABSORBED", true)}));
  const EvolutionResult r = evolve(w.config(3), backends(server), script_gate(30), false);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "ABSORBED") << r.detail;
  EXPECT_EQ(r.rounds, (std::vector<std::string>{"evo-001", "evo-002"}));
  EXPECT_EQ(r.merged_files, std::vector<std::string>{"experience/scale.md"});
  EXPECT_EQ(slurp(w.ckb / "experience/scale.md"),
            "<!-- evolved in evo-002; evidence: evo-002/candidate/reports/target/round-0.txt, evo-002/regen/reports/target/round-0.txt -->\n"
            "# scale\nscale() returns 2.\n");
  const std::string log = slurp(w.ckb / "evolution/log.toml");
  EXPECT_NE(log.find("id = \"evo-002\""), std::string::npos) << log;
  EXPECT_NE(log.find("change = \"added\""), std::string::npos) << log;
  EXPECT_EQ(log.find("evo-001"), std::string::npos) << log;
  // Round 2's orchestrator started from round 1's strategy and updated it.
  EXPECT_EQ(slurp(w.work / "evo-001/candidate/strategy/strategy.md"), "Round plan: learn scale(), then write it.\n");
  EXPECT_EQ(slurp(w.work / "evo-002/candidate/strategy/strategy.md"), "Round plan, revised: the delta must say 2 plainly.\n");
  // The evolution's figures together: round 1 (orchestrator, explorer, consolidator, candidate, regeneration, failure
  // analyst), round 2 (the same but the analyst) and the experiment summariser, with each transcript named from the
  // work directory.
  const json all = json::parse(slurp(w.work / "metrics.json"));
  EXPECT_EQ(all["totals"]["agents_started"], 12);
  EXPECT_EQ(all["conversations"][0]["transcript"], "evo-001/candidate/transcripts/orchestrator-001.jsonl");
  EXPECT_EQ(all["conversations"][11]["transcript"], "final/transcripts/experiment-summariser.jsonl");
  EXPECT_TRUE(fs::exists(w.work / all["conversations"][3]["transcript"].get<std::string>()));
  EXPECT_EQ(json::parse(slurp(w.work / "evolution.json"))["rounds"][0]["state"], "FAILED:regenerate");
  EXPECT_NE(slurp(w.work / "summary.md").find("| 12 |"), std::string::npos);
  // The summariser's report is the run's; the figures stay the workflow's: its attempt to rewrite them was refused
  // and counted, and its task carried what the workflow measured before it started (11 conversations).
  EXPECT_EQ(r.experiment_summary, "final/experiment/summary.md");
  EXPECT_EQ(slurp(w.work / "final/experiment/summary.md"), "# Summary\nABSORBED\n");
  EXPECT_EQ(json::parse(slurp(w.work / "final/metrics.json"))["totals"]["agents_started"], 1);
  ASSERT_EQ(all["violations"].size(), 1u) << all["violations"].dump(1);
  EXPECT_EQ(all["violations"][0]["rule"], "protected_path");
  EXPECT_EQ(all["violations"][0]["role"], "experiment_summariser");
  const std::string summariser_task = server.requests()[server.requests().size() - 3].body.dump();
  EXPECT_NE(summariser_task.find("| 11 |"), std::string::npos) << summariser_task.substr(0, 2000);
  // Asking again changes nothing and asks the endpoint nothing.
  const std::size_t requests = server.requests().size();
  EXPECT_EQ(evolve(w.config(3), backends(server), script_gate(30), true).state, "ABSORBED");
  EXPECT_EQ(server.requests().size(), requests);
}

// A regeneration that is an engine directory passes its stage gate (whose verdict the code under test produces) but
// not the final gates run from outside it: the round fails and nothing is merged. With final gates that pass, the
// same round is absorbed. (Stand-ins for engine_final_gates; `metainfer evolve` wires the real one.)
TEST(AgentEvolution, AnEngineRegenerationMustAlsoPassTheFinalGatesBeforeItsMerge) {
  REQUIRE_ISOLATION();
  for (const bool final_pass : {false, true}) {
    SCOPED_TRACE(final_pass);
    EvoWorld w;
    write(w.contracts / "MANIFEST.json", "{}\n");  // with the stage test below: an engine directory for stage target
    write(w.contracts / "tests/stage_target_test.cpp", "// the stage's test contract\n");
    std::vector<fs::path> judged;
    EvolutionConfig c = w.config(1);
    c.final_gates = [&](const fs::path& engine_dir) {
      judged.push_back(engine_dir);
      FinalGatesOutcome f;
      f.passed = final_pass;
      f.state = final_pass ? "PASSED:L0_provenance,PASS_VERIFIED,L3" : "FAILED:PASS_VERIFIED";
      f.acceptance = final_pass ? "PASS_VERIFIED" : "";
      f.evidence = "FAILED PASS_VERIFIED: greedy ids differ from the trace (forged stage report)\n";
      return f;
    };
    const std::vector<json> analysis = {
        tool_step({{"system_contains", "failure-analysis agent"}, {"body_contains", {"failed in phase regenerate", "forged stage report"}}},
                  "write_file", {{"path", "failure/analysis.md"}, {"content", "ANALYSIS: acceptance failed.\n"}}),
        text_step("Analysis written.")};
    mi_test::ScriptedLlmServer server(final_pass ? script({strategy(), explore_and_consolidate(), candidate_writes("2"), regeneration_writes("2"),
                                                           summary("ABSORBED")})
                                                 : script({strategy(), explore_and_consolidate(), candidate_writes("2"), regeneration_writes("2"),
                                                           analysis, summary("FAILED")}));
    const EvolutionResult r = evolve(c, backends(server), script_gate(30), false);
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    ASSERT_EQ(judged.size(), 1u);
    EXPECT_EQ(judged[0], w.work / "evo-001/regen");
    const json round = json::parse(slurp(w.work / "evo-001/round.json"));
    EXPECT_EQ(round["regenerate"]["state"], "PASSED");  // the stage gate itself passed
    EXPECT_EQ(round["regenerate_final_gates"]["passed"], final_pass);
    EXPECT_EQ(r.state, final_pass ? "ABSORBED" : "FAILED") << r.detail;
    EXPECT_EQ(fs::exists(w.ckb / "experience/scale.md"), final_pass);
  }
}

// The merge takes the delta the gates judged, not whatever candidate/ckb_delta/ holds by then: a delta changed after
// staging (here by the candidate's gate run, standing in for any way round the sandbox) fails the round, is counted,
// and nothing reaches the CKB.
TEST(AgentEvolution, ADeltaChangedAfterStagingIsNotMerged) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  const std::vector<json> analysis = {
      tool_step({{"system_contains", "failure-analysis agent"}, {"body_contains", {"failed in phase merge", "changed after it was staged"}}},
                "write_file", {{"path", "failure/analysis.md"}, {"content", "ANALYSIS: the delta was changed after staging.\n"}}),
      text_step("Analysis written.")};
  mi_test::ScriptedLlmServer server(script({strategy(), explore_and_consolidate(), candidate_writes("2"), regeneration_writes("2"),
                                            analysis, summary("FAILED")}));
  const GateRunner inner = script_gate(30);
  const GateRunner tampering = [&](const fs::path& run_dir, const std::string& stage) {
    if (run_dir.filename() == "candidate")
      std::ofstream(run_dir / "ckb_delta/experience/scale.md", std::ios::app) << "scale() returns 3 (no gate saw this).\n";
    return inner(run_dir, stage);
  };
  const EvolutionResult r = evolve(w.config(1), backends(server), tampering, false);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "FAILED") << r.detail;
  const json round = json::parse(slurp(w.work / "evo-001/round.json"));
  EXPECT_EQ(round["state"], "FAILED:merge");
  EXPECT_EQ(round["candidate"]["state"], "PASSED");
  EXPECT_EQ(round["regenerate"]["state"], "PASSED");
  EXPECT_FALSE(fs::exists(w.ckb / "experience/scale.md"));
  EXPECT_FALSE(fs::exists(w.ckb / "evolution"));
  // The staged copy is what the gates judged.
  EXPECT_EQ(slurp(w.work / "evo-001/staged_delta/experience/scale.md"), "# scale\nscale() returns 2.\n");
  const json metrics = json::parse(slurp(w.work / "metrics.json"));
  ASSERT_EQ(metrics["violations"].size(), 1u) << metrics["violations"].dump(1);
  EXPECT_EQ(metrics["violations"][0]["rule"], "delta_changed_after_staging");
}

TEST(AgentEvolution, AnInterruptedEvolutionResumesAtThePhaseItStoppedIn) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  {
    // The endpoint goes away after consolidation: the candidate phase's first request gets a 500.
    mi_test::ScriptedLlmServer server(script({strategy(), explore_and_consolidate()}));
    const EvolutionResult r = evolve(w.config(1), backends(server), script_gate(30), false);
    EXPECT_EQ(r.state, "INTERRUPTED") << r.detail;
    EXPECT_TRUE(r.experiment_summary.empty());  // not over: no summary yet
    EXPECT_FALSE(fs::exists(w.work / "final"));
    const json round = json::parse(slurp(w.work / "evo-001/round.json"));
    EXPECT_EQ(round["state"], "IN_PROGRESS");
    EXPECT_EQ(round["phase"], "candidate");
  }
  EXPECT_THROW(evolve(w.config(1), backends(mi_test::ScriptedLlmServer(json::object())), script_gate(30), false), mi::Error);
  EvolutionConfig other = w.config(1);
  other.target = "something else";
  EXPECT_THROW(evolve(other, [] { return std::unique_ptr<LlmBackend>(); }, script_gate(30), true), mi::Error);

  // Resumed: no exploration or consolidation again; the first request is the candidate implementer's.
  mi_test::ScriptedLlmServer server(script({candidate_writes("2"), regeneration_writes("2"), summary("ABSORBED")}));
  // Absorbed, but coverage (asked after the merge, with the merged CKB) still finds a gap no delta can close: the
  // round stays ABSORBED and the gap is reported.
  EvolutionConfig resumed = w.config(1);
  fs::path asked_with;
  resumed.after_merge = [&](const fs::path& merged_ckb) {
    asked_with = merged_ckb;
    return json{{"covered", false}, {"gaps", {"platform amx: the host lacks AMX"}}};
  };
  const EvolutionResult r = evolve(resumed, backends(server), script_gate(30), true);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "ABSORBED") << r.detail;
  EXPECT_TRUE(fs::exists(w.ckb / "experience/scale.md"));
  EXPECT_EQ(asked_with, w.ckb);
  EXPECT_EQ(r.coverage_after_merge["covered"], false);
  EXPECT_EQ(json::parse(slurp(w.work / "evo-001/round.json"))["coverage_after_merge"]["gaps"][0], "platform amx: the host lacks AMX");
  const std::string summary = slurp(w.work / "summary.md");
  EXPECT_NE(summary.find("evo-001: the merged CKB does not yet cover the target"), std::string::npos) << summary;
  EXPECT_NE(summary.find("gap left: platform amx: the host lacks AMX"), std::string::npos) << summary;
  // The candidate's metrics span both sessions: orchestrator, explorer, consolidator, the interrupted implementer and
  // its rerun; then the regeneration and the summariser.
  const json metrics = json::parse(slurp(w.work / "evo-001/candidate/metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 5);
  EXPECT_TRUE(fs::exists(w.work / "evo-001/candidate/transcripts/target-r0-implementer-2.jsonl"));
  EXPECT_EQ(json::parse(slurp(w.work / "metrics.json"))["totals"]["agents_started"], 7);
  EXPECT_EQ(r.experiment_summary, "final/experiment/summary.md");
}

TEST(AgentEvolution, ADeltaThatBreaksTheCkbIsNotStaged) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  mi_test::ScriptedLlmServer server(script({strategy(),
                                            {tool_step(json::object(), "write_file", {{"path", "exploration/notes.md"}, {"content", "x\n"}}), text_step("ok"),
                                             tool_step(json::object(), "write_file", {{"path", "ckb_delta/contracts/broken.toml"}, {"content", "id = \"broken\"\n"}}),
                                             text_step("ok")},
                                            {tool_step({{"system_contains", "failure-analysis agent"}, {"body_contains", {"lint"}}}, "write_file",
                                                       {{"path", "failure/analysis.md"}, {"content", "bad delta\n"}}),
                                             text_step("ok")},
                                            summary("FAILED:consolidate")}));
  const EvolutionResult r = evolve(w.config(1), backends(server), script_gate(30), false);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "FAILED");
  const json round = json::parse(slurp(w.work / "evo-001/round.json"));
  EXPECT_EQ(round["state"], "FAILED:consolidate");
  EXPECT_NE(round["detail"].get<std::string>().find("broken.toml"), std::string::npos) << round.dump(1);
  EXPECT_FALSE(fs::exists(w.ckb / "contracts/broken.toml"));
}

// A delta that rewrites the gate bounds or a role's grants never reaches the CKB: the round fails at consolidation,
// naming each file, and each is a violation in the run's metrics.
TEST(AgentEvolution, ADeltaOutsideTheKnowledgeLayersIsRefusedAndCounted) {
  REQUIRE_ISOLATION();
  EvoWorld w;
  const std::string gates_before = slurp(w.ckb / "test_contracts/gates.toml");
  const std::string roles_before = slurp(w.ckb / "roles/implementer.toml");
  mi_test::ScriptedLlmServer server(script(
      {strategy(),
       {tool_step(json::object(), "write_file", {{"path", "exploration/notes.md"}, {"content", "x\n"}}), text_step("ok"),
        tool_step(json::object(), "write_file", {{"path", "ckb_delta/test_contracts/gates.toml"}, {"content", gates_before + "\nprecise_logit_tolerance = 1e9\n"}}),
        tool_step(json::object(), "write_file", {{"path", "ckb_delta/roles/implementer.toml"}, {"content", roles_before + "\n# write_paths = [\"**\"]\n"}}),
        tool_step(json::object(), "write_file", {{"path", "ckb_delta/experience/scale.md"}, {"content", "scale() returns 2.\n"}}),
        text_step("ok")},
       {tool_step({{"system_contains", "failure-analysis agent"}, {"body_contains", {"knowledge layers"}}}, "write_file",
                  {{"path", "failure/analysis.md"}, {"content", "delta refused\n"}}),
        text_step("ok")},
       summary("FAILED:consolidate")}));
  const EvolutionResult r = evolve(w.config(1), backends(server), script_gate(30), false);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.state, "FAILED");
  const json round = json::parse(slurp(w.work / "evo-001/round.json"));
  EXPECT_EQ(round["state"], "FAILED:consolidate");
  const std::string detail = round["detail"];
  EXPECT_NE(detail.find("ckb_delta/test_contracts/gates.toml: not in a knowledge layer"), std::string::npos) << detail;
  EXPECT_NE(detail.find("ckb_delta/roles/implementer.toml"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("experience/scale.md"), std::string::npos) << detail;
  EXPECT_EQ(slurp(w.ckb / "test_contracts/gates.toml"), gates_before);
  EXPECT_EQ(slurp(w.ckb / "roles/implementer.toml"), roles_before);
  EXPECT_EQ(slurp(w.work / "evo-001/staged_ckb/test_contracts/gates.toml"), gates_before);
  const json metrics = json::parse(slurp(w.work / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["violations"], 2) << metrics.dump(1);
  int refused = 0;
  for (const auto& v : metrics["violations"]) refused += v["rule"] == "delta_outside_knowledge";
  EXPECT_EQ(refused, 2) << metrics["violations"].dump(1);
}

TEST(AgentEvolution, MergeAndStagingRefuseADeltaOutsideTheKnowledgeLayers) {
  mi_test::TempDir dir("agents-merge-layers");
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", dir / "ckb", fs::copy_options::recursive);
  write(dir / "delta/experience/ok.md", "fine\n");
  EXPECT_TRUE(refused_delta_files(dir / "delta", dir / "ckb").empty());
  for (const char* bad : {"roles/implementer.toml", "test_contracts/gates.toml", "agents/x.toml", "ckb.toml", "evolution/log.toml", "notes.md"}) {
    SCOPED_TRACE(bad);
    const fs::path planted = dir / "delta" / bad;
    const bool existed = fs::exists(dir / "ckb" / bad);
    const std::string before = existed ? slurp(dir / "ckb" / bad) : "";
    write(planted, "planted = true\n");
    ASSERT_EQ(refused_delta_files(dir / "delta", dir / "ckb").size(), 1u);
    EXPECT_THROW(merge_delta(dir / "delta", dir / "ckb", "evo-001", {}), mi::Error);
    EXPECT_THROW(stage_ckb(dir / "ckb", dir / "delta", dir / "staged"), mi::Error);
    EXPECT_EQ(existed ? slurp(dir / "ckb" / bad) : std::string(), before);
    EXPECT_FALSE(fs::exists(dir / "ckb/experience/ok.md"));  // nothing of the delta was written
    fs::remove(planted);
  }
}

TEST(AgentEvolution, AMergeRunTwiceLogsItsRoundOnce) {
  mi_test::TempDir dir("agents-merge");
  write(dir / "delta/contracts/x.toml", "id = \"x\"\n");
  write(dir / "ckb/contracts/x.toml", "id = \"old\"\n");
  for (int i = 0; i < 2; ++i) merge_delta(dir / "delta", dir / "ckb", "evo-007", {"evo-007/regen/reports/s/round-0.txt"});
  EXPECT_EQ(slurp(dir / "ckb/contracts/x.toml"), "# evolved in evo-007; evidence: evo-007/regen/reports/s/round-0.txt\nid = \"x\"\n");
  const std::string log = slurp(dir / "ckb/evolution/log.toml");
  EXPECT_EQ(log.find("[[round]]"), log.rfind("[[round]]")) << log;
  EXPECT_NE(log.find("change = \"replaced\""), std::string::npos) << log;
  // A delta path that is a symlink is refused: a delta is plain files.
  fs::create_symlink("/etc/passwd", dir / "delta/contracts/link.toml");
  EXPECT_THROW(delta_files(dir / "delta"), mi::Error);
}

}  // namespace
