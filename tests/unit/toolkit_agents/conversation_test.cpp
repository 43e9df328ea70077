// A role run as one conversation against the scripted endpoint over loopback HTTP: tool calls executed through the
// sandbox, results fed back, the transcript and the metrics counted by the runner.
#include <gtest/gtest.h>

#include <fstream>

#include "agents_test_support.h"
#include "../toolkit_support.h"
#include "agents/conversation.h"
#include "agents/run_metrics.h"
#include "agents/transcript.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";
const json kImplementerTools = {"list_dir", "read_file", "search_ckb", "write_file", "edit_file", "run_command"};

using agents_test::call;
using agents_test::slurp;
using agents_test::write;

BackendConfig backend_for(const std::string& provider, const mi_test::ScriptedLlmServer& s, bool stream) {
  BackendConfig c{provider, s.base_url() + (provider == "openai" ? "/v1" : ""), "scripted-model", "", stream, {}};
  c.http.timeout_s = 10;
  c.http.retry.initial_backoff_s = 0.01;
  return c;
}

class Conversation : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(Conversation, ImplementerReadsEditsAndFinishes) {
  const auto [provider, stream] = GetParam();
  mi_test::TempDir dir("agents-conv");
  const fs::path run = dir / "run";
  write(run / "src/kernel.cpp", "int scale() {\n  return 1;\n}\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"api", provider}, {"stream", stream}, {"tools", kImplementerTools}, {"last", "user"},
                   {"system_contains", "implementation agent"}, {"body_contains", {"Make scale() return 2"}}}},
       {"respond", {{"text", "Reading the kernel."}, {"tool_calls", {call("c1", "read_file", {{"path", "src/kernel.cpp"}})}}, {"usage", {{"input", 100}, {"output", 10}}}}}},
      // The file's text must have reached the model in the tool result.
      {{"expect", {{"last", "tool"}, {"body_contains", {"return 1;"}}}},
       {"respond", {{"tool_calls", {call("c2", "edit_file", {{"path", "src/kernel.cpp"}, {"old", "return 1;"}, {"new", "return 2;"}})}}, {"usage", {{"input", 150}, {"output", 20}}}}}},
      {{"expect", {{"last", "tool"}, {"body_contains", {"edited src/kernel.cpp"}}}},
       {"respond", {{"text", "Changed scale() to return 2; ready for the gate."}, {"usage", {{"input", 180}, {"output", 12}}}}}},
  })}});
  SandboxConfig sc;
  sc.run_dir = run;
  sc.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  ToolSandbox sandbox(sc);
  auto backend = make_backend(backend_for(provider, server, stream));
  const ConversationResult r = run_conversation(*backend, find_role(kRoles, "implementer"), sandbox, "Make scale() return 2.");

  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  EXPECT_EQ(slurp(run / "src/kernel.cpp"), "int scale() {\n  return 2;\n}\n");
  EXPECT_EQ(r.final_text, "Changed scale() to return 2; ready for the gate.");
  const ConversationMetrics& m = r.metrics;
  EXPECT_EQ(m.id, "implementer-001");
  EXPECT_EQ(m.stop, "end_turn");
  EXPECT_EQ(m.turns, 3);
  EXPECT_EQ(m.messages, 6);  // task, 3 assistant turns, 2 tool results
  EXPECT_EQ(m.tool_calls, (std::map<std::string, int>{{"edit_file", 1}, {"read_file", 1}}));
  EXPECT_EQ(m.edits, 1);
  EXPECT_EQ(m.lines_added, 1);
  EXPECT_EQ(m.lines_removed, 1);
  EXPECT_EQ(m.tokens_in, 430);
  EXPECT_EQ(m.tokens_out, 42);
  EXPECT_EQ(m.violations, 0);

  const auto events = read_transcript(run / m.transcript);
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"start", "system", "user", "assistant", "tool_result", "assistant",
                                             "tool_result", "assistant", "end"}));
  EXPECT_EQ(events[3]["tool_calls"][0]["arguments"]["path"], "src/kernel.cpp");
  EXPECT_EQ(events[4]["ok"], true);
  EXPECT_EQ(events.back()["stop"], "end_turn");

  RunMetrics run_metrics{"off", "test", {m}, sandbox.violations(), sandbox.reference_accesses(), 1.5};
  write_run_records(run, run_metrics);
  const json j = json::parse(slurp(run / "metrics.json"));
  EXPECT_EQ(j["totals"]["agents_started"], 1);
  EXPECT_EQ(j["totals"]["tool_calls_by_kind"]["read_file"], 1);
  EXPECT_EQ(j["totals"]["lines_changed"], 2);
  EXPECT_EQ(j["totals"]["tokens_in"], 430);
  const std::string md = slurp(run / "summary.md");
  EXPECT_NE(md.find("| implementer-001 | implementer | end_turn | 3 | 6 | 2 | 1 | 430/42 | 0 |"), std::string::npos) << md;
}

INSTANTIATE_TEST_SUITE_P(Agents, Conversation,
                         ::testing::Combine(::testing::Values("openai", "anthropic"), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_stream" : "_plain");
                         });

TEST(AgentConversation, RefusedCallsAreCountedFedBackAndTheConversationGoesOn) {
  mi_test::TempDir dir("agents-conv-violations");
  const fs::path run = dir / "run", ref = dir / "vllm-checkout";
  write(run / "tests/stage_test.cpp", "TEST(S, T) {}\n");
  write(ref / "attention.py", "secret\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("a", "read_file", {{"path", (ref / "attention.py").string()}}),
                                    call("b", "write_file", {{"path", "tests/stage_test.cpp"}, {"content", "// gone\n"}}),
                                    call("c", "browse_web", {{"url", "https://example.com"}})}}}}},
      {{"expect", {{"last", "tool"}, {"body_contains", {"refused (reference_path)", "refused (protected_path)", "refused (tool_not_granted)"}}}},
       {"respond", {{"text", "I could not read the reference; stopping."}}}},
  })}});
  SandboxConfig sc;
  sc.run_dir = run;
  sc.reference_paths = {ref};
  ToolSandbox sandbox(sc);
  auto backend = make_backend(backend_for("openai", server, false));
  const ConversationResult r = run_conversation(*backend, find_role(kRoles, "implementer"), sandbox, "Implement attention.");
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.metrics.violations, 3);
  EXPECT_EQ(r.metrics.edits, 0);
  EXPECT_EQ(slurp(run / "tests/stage_test.cpp"), "TEST(S, T) {}\n");
  // The refusals are on disk as they happened, as well as in the sandbox.
  EXPECT_EQ(read_transcript(run / ".metainfer/violations.jsonl").size(), 3u);
  const auto events = read_transcript(run / r.metrics.transcript);
  EXPECT_EQ(events[4]["violation"], true);
}

TEST(AgentConversation, StopsAtMaxTurnsAndOnABackendError) {
  mi_test::TempDir dir("agents-conv-limits");
  const fs::path run = dir / "run";
  fs::create_directories(run);
  json steps = json::array();
  for (int i = 0; i < 2; ++i) steps.push_back({{"respond", {{"tool_calls", {call("l" + std::to_string(i), "list_dir", {{"path", "."}})}}}}});
  steps.push_back({{"respond", {{"status", 503}, {"error", "overloaded"}}}});
  mi_test::ScriptedLlmServer server(json{{"steps", steps}});
  SandboxConfig sc;
  sc.run_dir = run;
  ToolSandbox sandbox(sc);
  BackendConfig bc = backend_for("anthropic", server, false);
  bc.http.retry.max_attempts = 1;
  auto backend = make_backend(bc);
  const AgentRoleSpec reviewer = find_role(kRoles, "spec_reviewer");
  const ConversationResult a = run_conversation(*backend, reviewer, sandbox, "Review.", {.max_turns = 2});
  EXPECT_EQ(a.metrics.stop, "max_turns");
  EXPECT_EQ(a.metrics.tool_calls.at("list_dir"), 2);
  const ConversationResult b = run_conversation(*backend, reviewer, sandbox, "Review again.");
  EXPECT_EQ(b.metrics.stop, "error");
  EXPECT_EQ(b.metrics.id, "spec_reviewer-002");
  EXPECT_NE(b.final_text.find("HTTP 503: overloaded"), std::string::npos) << b.final_text;
  EXPECT_EQ(read_transcript(run / b.metrics.transcript).back()["stop"], "error");
}

// An endpoint whose answer has the wrong shape (a tool call that is a number) ends the conversation with stop
// "error" and a message naming it, recorded in the transcript; it does not take the run down.
TEST(AgentConversation, AMalformedResponseEndsTheConversationWithAnError) {
  mi_test::TempDir dir("agents-conv-malformed");
  const fs::path run = dir / "run";
  fs::create_directories(run);
  const json raw = {{"choices", {{{"message", {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {1}}}},
                                  {"finish_reason", "tool_calls"}}}}};
  mi_test::ScriptedLlmServer server(json{{"steps", {{{"respond", {{"raw", raw}}}}}}});
  SandboxConfig sc;
  sc.run_dir = run;
  ToolSandbox sandbox(sc);
  BackendConfig bc = backend_for("openai", server, false);
  bc.http.retry.max_attempts = 1;
  auto backend = make_backend(bc);
  const ConversationResult r = run_conversation(*backend, find_role(kRoles, "spec_reviewer"), sandbox, "Review.");
  EXPECT_EQ(r.metrics.stop, "error");
  EXPECT_NE(r.final_text.find("malformed response"), std::string::npos) << r.final_text;
  EXPECT_EQ(read_transcript(run / r.metrics.transcript).back()["stop"], "error");
}

TEST(AgentConversation, OldToolResultsAreElidedToFitTheHistoryBound) {
  mi_test::TempDir dir("agents-conv-elide");
  const fs::path run = dir / "run";
  write(run / "src/a.txt", std::string(3000, 'a') + "\n");
  write(run / "src/b.txt", std::string(3000, 'b') + "\n");
  write(run / "src/c.txt", std::string(3000, 'c') + "\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("1", "read_file", {{"path", "src/a.txt"}})}}}}},
      {{"respond", {{"tool_calls", {call("2", "read_file", {{"path", "src/b.txt"}})}}}}},
      {{"respond", {{"tool_calls", {call("3", "read_file", {{"path", "src/c.txt"}})}}}}},
      // a.txt's result no longer fits beside b and c: elided; the two latest stay whole.
      {{"expect", {{"body_contains", {"[elided 3001 characters", std::string(3000, 'b'), std::string(3000, 'c')}}}}, {"respond", {{"text", "done"}}}},
  })}});
  SandboxConfig sc;
  sc.run_dir = run;
  ToolSandbox sandbox(sc);
  auto backend = make_backend(backend_for("openai", server, false));
  const ConversationResult r = run_conversation(*backend, find_role(kRoles, "spec_reviewer"), sandbox, "Review.", {.max_history_chars = 8000});
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.metrics.stop, "end_turn");
  EXPECT_EQ(server.requests()[3].body.dump().find(std::string(3000, 'a')), std::string::npos);
  bool logged = false;
  for (const auto& e : read_transcript(run / r.metrics.transcript)) logged = logged || e["kind"] == "elided";
  EXPECT_TRUE(logged);
}

}  // namespace
