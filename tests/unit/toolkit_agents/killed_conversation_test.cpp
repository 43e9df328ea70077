// A conversation whose process is killed (here by a wall-clock limit, in the middle of a tool call) still counts in
// the run's Table 1 figures: its transcript is counted back when the run resumes and when an evolution's records
// are combined.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/agent_run.h"
#include "agents/isolated_command.h"
#include "agents/run_metrics.h"
#include "agents/transcript_metrics.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

using agents_test::call;
using agents_test::slurp;
using agents_test::write;

TEST(AgentKilledConversation, IsCountedFromItsTranscript) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "run_command refuses without isolation";
  mi_test::TempDir dir("agents-killed");
  const fs::path run = dir / "run";
  write(run / "src/kernel.cpp", "int f() { return 1; }\n");
  // Two turns: an edit, then a command that outlives the process's time limit.
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("w", "write_file", {{"path", "src/kernel.cpp"}, {"content", "int f() {\n  return 2;\n}\n"}})}},
                    {"usage", {{"input", 100}, {"output", 10}}}}}},
      {{"respond", {{"tool_calls", {call("s", "run_command", {{"command", "sleep 60"}, {"timeout_s", 120}})}},
                    {"usage", {{"input", 200}, {"output", 20}}}}}},
  })}});
  const auto killed = mi_test::metainfer({"agents", "converse", "--role", "implementer", "--run-dir", run.string(), "--task",
                                          "Make f() return 2.", "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted"},
                                         6);
  ASSERT_TRUE(killed.timed_out) << killed.out << killed.err;
  ASSERT_EQ(server.steps_left(), 0u);
  // The killed process never wrote metrics.json: the transcript is the only record.
  ASSERT_TRUE(fs::exists(run / "transcripts/implementer-001.jsonl"));

  // An evolution's combined records (which read directories that were never resumed) count it.
  const RunMetrics combined = combine_run_records(dir.path(), {run});
  ASSERT_EQ(combined.conversations.size(), 1u);
  const ConversationMetrics& c = combined.conversations[0];
  EXPECT_EQ(c.stop, kKilledStop);
  EXPECT_EQ(c.role, "implementer");
  EXPECT_EQ(c.transcript, "run/transcripts/implementer-001.jsonl");
  EXPECT_EQ(c.turns, 2);
  EXPECT_EQ(c.messages, 4);  // the task, two assistant turns, one tool result (the command never returned)
  EXPECT_EQ(c.tool_calls, (std::map<std::string, int>{{"run_command", 1}, {"write_file", 1}}));
  EXPECT_EQ(c.edits, 1);
  EXPECT_EQ(c.lines_added, 3);
  EXPECT_EQ(c.tokens_in, 300);
  EXPECT_EQ(c.tokens_out, 30);
  EXPECT_EQ(combined.to_json()["totals"]["agents_started"], 1);

  // Resuming the run: the killed conversation is in metrics.json beside the new one.
  mi_test::ScriptedLlmServer resumed(json{{"steps", json::array({{{"respond", {{"text", "Done."}, {"usage", {{"input", 7}, {"output", 1}}}}}}})}});
  BackendConfig bc{"openai", resumed.base_url() + "/v1", "scripted-model", "", false, {}};
  bc.http.timeout_s = 10;
  AgentRunConfig cfg;
  cfg.sandbox.run_dir = run;
  cfg.sandbox.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  AgentRun again(cfg, make_backend(bc));
  again.converse("implementer", "Finish.");
  const json metrics = json::parse(slurp(run / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 2) << metrics.dump(2);
  EXPECT_EQ(metrics["totals"]["tool_calls"], 2);
  EXPECT_EQ(metrics["totals"]["tokens_in"], 307);
  EXPECT_EQ(metrics["totals"]["edits"], 1);
  EXPECT_EQ(metrics["conversations"][0]["stop"], kKilledStop);
  EXPECT_EQ(metrics["conversations"][1]["stop"], "end_turn");
}

// A transcript cut in the middle of a line (the process died writing it) is read up to its last whole event.
TEST(AgentKilledConversation, ATornLastLineIsIgnored) {
  mi_test::TempDir dir("agents-torn");
  write(dir / "transcripts/explorer-001.jsonl",
        "{\"kind\":\"start\",\"role\":\"explorer\",\"seq\":0,\"t\":0}\n{\"kind\":\"user\",\"seq\":1,\"t\":0.1}\n"
        "{\"kind\":\"assistant\",\"usage\":{\"input\":5,\"output\":2},\"http_attempts\":1,\"tool_calls\":[{\"id\":\"a\",\"name\":\"read_file\"}],\"seq\":2,\"t\":1.5}\n"
        "{\"kind\":\"tool_res");
  const auto convs = unrecorded_conversations(dir.path(), {});
  ASSERT_EQ(convs.size(), 1u);
  EXPECT_EQ(convs[0].role, "explorer");
  EXPECT_EQ(convs[0].tokens_in, 5);
  EXPECT_EQ(convs[0].tool_calls.at("read_file"), 1);  // in flight
  EXPECT_DOUBLE_EQ(convs[0].wall_s, 1.5);
  // Recorded conversations are not counted twice.
  ConversationMetrics known;
  known.transcript = "transcripts/explorer-001.jsonl";
  EXPECT_TRUE(unrecorded_conversations(dir.path(), {known}).empty());
  // A damaged line before the end is an error that names the file and line.
  write(dir / "transcripts/explorer-002.jsonl", "{\"kind\":\"start\"}\nnot json\n{\"kind\":\"end\",\"stop\":\"end_turn\"}\n");
  try {
    unrecorded_conversations(dir.path(), {known});
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("explorer-002.jsonl:2"), std::string::npos) << e.what();
  }
}

}  // namespace
