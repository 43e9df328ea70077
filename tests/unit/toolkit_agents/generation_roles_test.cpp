// The roles around the stages of `generate --backend agents` (engine_generation.h), with stand-in gates so that no
// engine is built: the orchestrator writes the strategy the implementers are pointed at, each stage starts with its
// own sources withheld (a silent implementer fails; one that writes them passes), and the experiment summariser
// writes the run's report from the figures the workflow measured and cannot change them. The real gates judge the
// same workflow in generate_agents_test.cpp.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/engine_generation.h"
#include "agents/protected_files.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;
using agents_test::write;

using agents_test::step;
using agents_test::text;
json write_call(const std::string& path, const std::string& content) {
  return {{"tool_calls", json::array({call("w", "write_file", {{"path", path}, {"content", content}})})}};
}

// Two stages, "a" and "b", each owning one source file drafted by the "generator"; a stage's gate passes when its
// file holds the stage's name in capitals. The final gates accept whatever reaches them.
struct World {
  mi_test::TempDir dir{"agents-generation-roles"};
  fs::path run = dir / "engine";
  std::vector<EngineStageBrief> stages = {{"a", {}, {"src/a.txt"}, "Stage a: src/a.txt must hold A."},
                                          {"b", {}, {"src/b.txt"}, "Stage b: src/b.txt must hold B."}};
  int final_gate_runs = 0;
  World() {
    write(run / "src/a.txt", "A\n");  // the draft: what a silent implementer would otherwise pass with
    write(run / "src/b.txt", "B\n");
    write(run / "tests/stage_a_test.cpp", "// a\n");
    write(run / "plan.json", "{\"covered\": true}\n");
    write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  }
  EngineGenerationResult generate(const mi_test::ScriptedLlmServer& server) {
    AgentRunConfig cfg;
    cfg.sandbox.run_dir = run;
    cfg.sandbox.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
    BackendConfig bc{"openai", server.base_url() + "/v1", "scripted", "", false, {}};
    bc.http.retry.max_attempts = 1;
    AgentRun agents(cfg, make_backend(bc));
    const GateRunner gate = [](const fs::path& dir, const std::string& stage) -> GateOutcome {
      const fs::path f = dir / "src" / (stage + ".txt");
      std::string want = stage;
      for (char& c : want) c = char(std::toupper(static_cast<unsigned char>(c)));
      const bool ok = fs::exists(f) && slurp(f) == want + "\n";
      return {ok, ok ? "PASSED" : "FAILED: src/" + stage + ".txt must hold " + want + (fs::exists(f) ? "" : "; it does not exist")};
    };
    const FinalGatesRunner final_gates = [this](const fs::path&) {
      ++final_gate_runs;
      return FinalGatesOutcome{true, "PASS_VERIFIED", "PASSED:L0_provenance,PASS_VERIFIED,L3", "all passed"};
    };
    return generate_engine_with_agents(agents, stages, {0, false}, gate, final_gates);
  }
};

TEST(AgentGenerationRoles, ASilentImplementerFailsItsStageBecauseItsSourcesAreWithheld) {
  World w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      step(text("Nothing to plan."), {{"system_contains", "main agent"}}),
      step(text("The sources are fine."), {{"system_contains", "implementation agent"}, {"body_contains", {"Stage a: src/a.txt must hold A."}}}),
      step(write_call("experiment/summary.md", "Stage a failed: nothing was written.\n"),
           {{"system_contains", "experiment-summary agent"}, {"body_contains", {"FAILED:a", "round 0 FAILED", "Figures measured by the workflow"}}}),
      step(text("Done.")),
  })}});
  const EngineGenerationResult r = w.generate(server);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(r.state, "FAILED:a");
  EXPECT_FALSE(fs::exists(w.run / "src/a.txt"));    // withheld when stage a started
  EXPECT_EQ(slurp(w.run / "src/b.txt"), "B\n");     // stage b never started: its draft is still there
  EXPECT_NE(slurp(w.run / "reports/a/round-0.txt").find("does not exist"), std::string::npos);
  EXPECT_EQ(w.final_gate_runs, 0);
  EXPECT_TRUE(r.strategy.empty());
  EXPECT_EQ(r.experiment_summary, "experiment/summary.md");
}

TEST(AgentGenerationRoles, TheStrategyReachesTheImplementersAndTheSummaryQuotesMeasuredFigures) {
  World w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      // The orchestrator's brief names every stage and its files; it writes the strategy.
      step(write_call("strategy/strategy.md", "Write A, then B.\n"),
           {{"system_contains", "main agent"}, {"body_contains", {"plan.json", "src/a.txt", "src/b.txt", "Write the strategy to strategy/strategy.md"}}}),
      step(text("Strategy written.")),
      // Each implementer is pointed at it, and writes its withheld file.
      step(write_call("src/a.txt", "A\n"), {{"system_contains", "implementation agent"}, {"body_contains", {"Stage a", "strategy/strategy.md"}}}),
      step(text("Wrote A.")),
      step(write_call("src/b.txt", "B\n"), {{"body_contains", {"Stage b", "strategy/strategy.md"}}}),
      step(text("Wrote B.")),
      // The summariser's task carries the outcome and the measured figures (three conversations so far); its attempt
      // to rewrite the figures is refused, its report written.
      step(write_call("metrics.json", "{\"format\": \"metainfer-agent-metrics/1\", \"conversations\": []}\n"),
           {{"system_contains", "experiment-summary agent"},
            {"body_contains", {"PASS_VERIFIED", "stage a: PASSED", "stage b: PASSED", "final gates", "| 3 |"}}}),
      step(write_call("experiment/summary.md", "Both stages passed in one round.\n"), {{"body_contains", {"protected_path"}}}),
      step(text("Done.")),
  })}});
  const EngineGenerationResult r = w.generate(server);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(r.state, "PASS_VERIFIED") << r.detail;
  EXPECT_EQ(w.final_gate_runs, 1);
  EXPECT_EQ(r.strategy, "strategy/strategy.md");
  EXPECT_EQ(r.experiment_summary, "experiment/summary.md");
  EXPECT_EQ(slurp(w.run / "experiment/summary.md"), "Both stages passed in one round.\n");
  // The figures are the workflow's: four conversations, the summariser's refused write counted as a violation.
  const json metrics = json::parse(slurp(w.run / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 4) << metrics.dump(1);
  EXPECT_EQ(metrics["conversations"][0]["role"], "orchestrator");
  EXPECT_EQ(metrics["conversations"][3]["role"], "experiment_summariser");
  ASSERT_EQ(metrics["violations"].size(), 1u);
  EXPECT_EQ(metrics["violations"][0]["path"], "metrics.json");
  EXPECT_EQ(metrics["violations"][0]["rule"], "protected_path");
  const json generation = json::parse(slurp(w.run / ".metainfer/generation.json"));
  EXPECT_EQ(generation["strategy"], "strategy/strategy.md");
  EXPECT_EQ(generation["experiment_summary"], "experiment/summary.md");
}

// An orchestrator stopped by the endpoint stops the run before any stage, and no further role is started.
TEST(AgentGenerationRoles, AnEndpointFailingTheOrchestratorStopsTheRun) {
  World w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({step({{"status", 400}, {"error", "stop"}})})}});
  const EngineGenerationResult r = w.generate(server);
  EXPECT_EQ(r.state, "AGENT_ERROR:strategy");
  EXPECT_TRUE(r.stages.empty());
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(slurp(w.run / "src/a.txt"), "A\n");  // no stage started: nothing withheld
}

}  // namespace
