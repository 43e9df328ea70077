// `metainfer agents converse|stage` as a user runs them, against the scripted endpoint on loopback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "../toolkit_support.h"
#include "agents/isolated_command.h"
#include "agents/transcript.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using agents_test::call;
using agents_test::slurp;
using agents_test::write;

TEST(AgentCli, ConverseRunsARoleAgainstAnAnthropicEndpointWithStreaming) {
  mi_test::TempDir dir("agents-cli");
  const fs::path run = dir / "run";
  write(run / "plan.json", "{\"covered\": true}\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"api", "anthropic"}, {"stream", true}, {"system_contains", "main agent"}}},
       {"respond", {{"tool_calls", {call("r", "read_file", {{"path", "plan.json"}})}}, {"usage", {{"input", 40}, {"output", 8}}}}}},
      {{"expect", {{"body_contains", {"covered"}}}},
       {"respond", {{"tool_calls", {call("w", "write_file", {{"path", "strategy/strategy.md"}, {"content", "Route: regular generation.\n"}})}}, {"usage", {{"input", 50}, {"output", 9}}}}}},
      {{"respond", {{"text", "Strategy written."}, {"usage", {{"input", 60}, {"output", 4}}}}}},
  })}});
  ::setenv("MI_TEST_SCRIPTED_KEY", "sk-ant-test", 1);
  const auto r = mi_test::metainfer({"agents", "converse", "--role", "orchestrator", "--run-dir", run.string(), "--task",
                                     "Plan the generation.", "--llm", "anthropic", "--llm-url", server.base_url(), "--llm-model",
                                     "scripted", "--llm-key-env", "MI_TEST_SCRIPTED_KEY", "--llm-stream"},
                                    60);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  ASSERT_FALSE(server.requests().empty());
  EXPECT_EQ(server.requests()[0].headers.at("x-api-key"), "sk-ant-test");
  const json last = mi_test::last_json_line(r.out);
  EXPECT_EQ(last["role"], "orchestrator");
  EXPECT_EQ(last["stop"], "end_turn");
  EXPECT_EQ(last["tokens_in"], 150);
  EXPECT_EQ(last["final_text"], "Strategy written.");
  EXPECT_EQ(slurp(run / "strategy/strategy.md"), "Route: regular generation.\n");
  const json metrics = json::parse(slurp(run / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["tool_calls"], 2);
  const fs::path transcript = run / "transcripts/orchestrator-001.jsonl";
  ASSERT_TRUE(fs::exists(transcript));
  // Each tool result carries the counts the metrics are counted back from (transcript_metrics.h).
  int results = 0;
  for (const json& e : mi::agents::read_transcript(transcript))
    if (e["kind"] == "tool_result") {
      ++results;
      for (const char* field : {"ok", "violation", "violations", "edits", "lines_added", "lines_removed", "output"})
        EXPECT_TRUE(e.contains(field)) << field << ": " << e.dump();
    }
  EXPECT_EQ(results, 2);
  // The README's first excerpt is this transcript: METAINFER_KEEP_TRANSCRIPTS=DIR keeps a copy there.
  if (const char* keep = std::getenv("METAINFER_KEEP_TRANSCRIPTS"))
    fs::copy_file(transcript, fs::path(keep) / "AgentCli.ConverseRunsARoleAgainstAnAnthropicEndpointWithStreaming.jsonl",
                  fs::copy_options::overwrite_existing);
}

TEST(AgentCli, StagePassesWhenItsGateScriptPasses) {
  if (mi::agents::command_isolation().kind == mi::agents::IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  mi_test::TempDir dir("agents-cli-stage");
  const fs::path run = dir / "run";
  write(run / "gates/hello.sh", "test \"$(cat src/hello.txt 2>/dev/null)\" = hello || { echo 'src/hello.txt must say hello'; exit 1; }\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("w", "write_file", {{"path", "src/hello.txt"}, {"content", "hello\n"}})}}}}},
      {{"respond", {{"text", "Wrote it."}}}},
  })}});
  const auto r = mi_test::metainfer({"agents", "stage", "--run-dir", run.string(), "--stage", "hello", "--objective",
                                     "Write hello into src/hello.txt.", "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted"},
                                    120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const json last = mi_test::last_json_line(r.out);
  EXPECT_EQ(last["state"], "PASSED") << r.out << r.err;
  EXPECT_TRUE(fs::exists(run / ".metainfer/protected.json"));
}

TEST(AgentCli, EvolveAbsorbsARoundAndResumeReportsIt) {
  if (mi::agents::command_isolation().kind == mi::agents::IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  mi_test::TempDir dir("agents-cli-evolve");
  const fs::path ckb = dir / "ckb", contracts = dir / "contracts", work = dir / "work";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  write(contracts / "gates/target.sh", "grep -q 42 src/answer.txt\n");
  auto write_step = [](const std::string& path, const std::string& content) {
    return json{{"respond", {{"tool_calls", {call("w", "write_file", {{"path", path}, {"content", content}})}}}}};
  };
  const json done = {{"respond", {{"text", "done"}}}};
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      write_step("strategy/strategy.md", "Learn the answer, then write it.\n"), done,         // orchestrator
      write_step("exploration/notes.md", "The answer is 42.\n"), done,                      // explorer
      write_step("ckb_delta/experience/answer.md", "The answer is 42.\n"), done,            // consolidator
      write_step("src/answer.txt", "42\n"), done,                                          // candidate
      write_step("src/answer.txt", "42\n"), done,                                          // regeneration
      write_step("experiment/summary.md", "Absorbed in one round.\n"), done,                // experiment summariser
  })}});
  const std::vector<std::string> args = {"agents", "evolve", "--work-dir", work.string(), "--target", "Learn the answer.",
                                         "--contracts", contracts.string(), "--ckb", ckb.string(), "--llm-url",
                                         server.base_url() + "/v1", "--llm-model", "scripted"};
  const auto r = mi_test::metainfer(args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(mi_test::last_json_line(r.out)["state"], "ABSORBED") << r.out << r.err;
  EXPECT_TRUE(fs::exists(ckb / "experience/answer.md"));
  EXPECT_EQ(mi_test::last_json_line(r.out)["experiment_summary"], (work / "final/experiment/summary.md").string());
  // Again without --resume: refused (exit 2); with it: the recorded result, no new request.
  EXPECT_EQ(mi_test::metainfer(args).exit_code, 2);
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  const auto again = mi_test::metainfer(resume);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(server.requests().size(), 12u);
}

TEST(AgentCli, EvolveIsEnteredOnlyWhenCoverageFails) {
  mi_test::TempDir dir("agents-cli-evolve-plan");
  const fs::path contracts = dir / "contracts";
  write(contracts / "gates/target.sh", "exit 1\n");
  // Covered: nothing to evolve, no request.
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"system_contains", "main agent"}, {"body_contains", {"gated_deltanet", "inputs/"}}}},
       {"respond", {{"text", "No strategy file this time."}}}},
      {{"expect", {{"system_contains", "exploration agent"}, {"body_contains", {"gated_deltanet", "inputs/plan.json"}}}},
       {"respond", {{"tool_calls", {call("r", "read_file", {{"path", "inputs/config.json"}})}}}}},
      {{"expect", {{"body_contains", {"Qwen9HybridForCausalLM"}}}}, {"respond", {{"text", "Read the config."}}}},
  })}});
  const std::vector<std::string> llm = {"--contracts", contracts.string(), "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted",
                                        "--llm-attempts", "1"};
  std::vector<std::string> covered = {"agents", "evolve", "--work-dir", (dir / "w1").string(), "--model", mi_test::golden("qwen3-tiny").string()};
  covered.insert(covered.end(), llm.begin(), llm.end());
  const auto c = mi_test::metainfer(covered, 60);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_EQ(mi_test::last_json_line(c.out)["state"], "COVERED");
  EXPECT_TRUE(server.requests().empty());
  // Not covered (the qwen3_next-tiny weights under an architecture no family knows): the plan's gaps brief the
  // explorer, who can read the checkpoint's config; the script then runs out, so the round stops resumable.
  const fs::path unknown = dir / "unknown-arch";
  fs::create_directories(unknown);
  fs::copy_file(mi_test::golden("qwen3_next-tiny") / "model.safetensors", unknown / "model.safetensors");
  json config = json::parse(std::ifstream(mi_test::golden("qwen3_next-tiny") / "config.json"));
  config["architectures"] = {"Qwen9HybridForCausalLM"};
  write(unknown / "config.json", config.dump(2));
  std::vector<std::string> gap = {"agents", "evolve", "--work-dir", (dir / "w2").string(), "--model", unknown.string()};
  gap.insert(gap.end(), llm.begin(), llm.end());
  const auto g = mi_test::metainfer(gap, 60);
  EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
  EXPECT_EQ(mi_test::last_json_line(g.out)["state"], "INTERRUPTED") << g.out;
  // The orchestrator's request and the explorer's two matched; the consolidator's found the script exhausted, as
  // planned.
  ASSERT_EQ(server.failures().size(), 1u) << ::testing::PrintToString(server.failures());
  EXPECT_NE(server.failures()[0].find("request 4 (openai): the script has no step left"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "w2/evo-001/candidate/inputs/plan.json"));
}

TEST(AgentCli, BadInputExitsTwo) {
  mi_test::TempDir dir("agents-cli-bad");
  EXPECT_EQ(mi_test::metainfer({"agents", "converse", "--role", "implementer", "--run-dir", (dir / "nope").string(), "--task", "x",
                                "--llm-model", "m"}).exit_code, 2);
  const auto unknown = mi_test::metainfer({"agents", "converse", "--role", "verifier", "--run-dir", dir.path().string(), "--task", "x",
                                           "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("role 'verifier' is not an LLM role"), std::string::npos) << unknown.err;
  ::unsetenv("MI_TEST_UNSET_KEY");
  const auto nokey = mi_test::metainfer({"agents", "converse", "--role", "implementer", "--run-dir", dir.path().string(), "--task", "x",
                                         "--llm-model", "m", "--llm-key-env", "MI_TEST_UNSET_KEY"});
  EXPECT_EQ(nokey.exit_code, 2);
  EXPECT_NE(nokey.err.find("MI_TEST_UNSET_KEY"), std::string::npos) << nokey.err;
  const auto nogate = mi_test::metainfer({"agents", "stage", "--run-dir", dir.path().string(), "--stage", "kernel", "--objective", "x",
                                          "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"});
  EXPECT_EQ(nogate.exit_code, 2);
  EXPECT_NE(nogate.err.find("gates/kernel.sh"), std::string::npos) << nogate.err;
}

}  // namespace
