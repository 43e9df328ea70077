// The workflow's own records (transcripts, the reference-access and violation logs, metrics.json, summary.md) are out
// of every agent's reach: with SWITCH=ON the explorer's reference reads land in its transcript, and the implementer
// that shares the run directory with SWITCH=OFF must not get them back from there. Planted cheats, run as real
// conversations against the scripted endpoint over loopback HTTP, as an evolution round's candidate runs them (one
// run directory, the explorer with the switch on, then the implementer with it off).
#include <gtest/gtest.h>

#include <map>

#include "../toolkit_support.h"
#include "agents/agent_run.h"
#include "agents/command_audit.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents/transcript.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;
using agents_test::write;

const fs::path kCkb = fs::path(METAINFER_SOURCE_DIR) / "ckb";
const fs::path kRoles = kCkb / "roles";
constexpr const char* kSecret = "SECRET_REFERENCE_KERNEL";

json tool_step(const std::string& id, const std::string& name, json args) {
  return {{"respond", {{"tool_calls", {call(id, name, std::move(args))}}}}};
}
json done_step() { return {{"respond", {{"text", "done"}}}}; }

BackendConfig backend_for(const mi_test::ScriptedLlmServer& s) {
  BackendConfig c{"openai", s.base_url() + "/v1", "scripted-model", "", false, {}};
  c.http.timeout_s = 10;
  return c;
}

// A candidate's run directory and a reference checkout beside it; the explorer has read the reference with the
// switch on, so its transcript, the access log, metrics.json and summary.md exist as the workflow wrote them.
struct ExploredRun {
  mi_test::TempDir dir{"agents-records"};
  fs::path run = dir / "candidate", ref = dir / "ref";
  std::unique_ptr<mi_test::ScriptedLlmServer> server;
  std::unique_ptr<AgentRun> agents;

  explicit ExploredRun(const std::vector<json>& implementer_steps) {
    write(ref / "vllm/x.py", std::string("def paged_attention():\n    return ") + kSecret + "\n");
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    json steps = json::array({tool_step("e1", "read_file", {{"path", (fs::canonical(ref) / "vllm/x.py").string()}}),
                              tool_step("e2", "write_file", {{"path", "exploration/notes.md"}, {"content", "Paged attention: blocks of 16 tokens.\n"}}),
                              done_step()});
    for (const json& s : implementer_steps) steps.push_back(s);
    server = std::make_unique<mi_test::ScriptedLlmServer>(json{{"steps", steps}});
    AgentRunConfig rc;
    rc.sandbox.run_dir = run;
    rc.sandbox.ckb_dir = kCkb;
    rc.sandbox.reference_paths = {ref};
    rc.sandbox.command_timeout_s = 30;
    agents = std::make_unique<AgentRun>(rc, make_backend(backend_for(*server)));
    agents->set_source_switch(SourceSwitch::on);
    agents->converse("explorer", "Explore paged attention.");
    agents->set_source_switch(SourceSwitch::off);
  }
  std::vector<json> implementer_results() const {
    std::vector<json> out;
    for (const json& e : read_transcript(run / "transcripts/implementer-001.jsonl"))
      if (e["kind"] == "tool_result") out.push_back(e);
    return out;
  }
};

// The reviewer's reproduction: the explorer read the reference with the switch on; the implementer, with it off,
// asks every file tool for the explorer's transcript and the logs. Each is refused and counted; nothing comes back.
TEST(AgentWorkflowRecords, NoFileToolHandsTheImplementerAnotherRolesTranscriptOrTheLogs) {
  ExploredRun w({tool_step("i1", "read_file", {{"path", "transcripts/explorer-001.jsonl"}}),
                 tool_step("i2", "list_dir", {{"path", "transcripts"}}),
                 tool_step("i3", "read_file", {{"path", ".metainfer/reference_access.jsonl"}}),
                 tool_step("i4", "read_file", {{"path", "summary.md"}}),
                 tool_step("i5", "read_file", {{"path", "metrics.json"}}),
                 tool_step("i6", "read_file", {{"path", "src/../transcripts/explorer-001.jsonl"}}),
                 tool_step("i7", "list_dir", {{"path", "."}}),
                 done_step()});
  // The explorer's read is in its transcript (the records are the workflow's, and complete).
  ASSERT_NE(slurp(w.run / "transcripts/explorer-001.jsonl").find(kSecret), std::string::npos);
  ASSERT_TRUE(fs::exists(w.run / "summary.md"));
  w.agents->converse("implementer", "Implement paged attention.");
  EXPECT_TRUE(w.server->failures().empty()) << ::testing::PrintToString(w.server->failures());

  const std::vector<json> results = w.implementer_results();
  ASSERT_EQ(results.size(), 7u);
  for (std::size_t i = 0; i + 1 < results.size(); ++i) {
    EXPECT_TRUE(results[i]["violation"].get<bool>()) << results[i].dump();
    EXPECT_NE(results[i]["output"].get<std::string>().find("workflow_record"), std::string::npos) << results[i].dump();
  }
  for (const json& r : results) EXPECT_EQ(r["output"].get<std::string>().find(kSecret), std::string::npos) << r.dump();
  // The listing of the run directory shows the roles' files, not the records.
  const std::string listing = results.back()["output"];
  EXPECT_TRUE(results.back()["ok"].get<bool>()) << listing;
  EXPECT_NE(listing.find("exploration/"), std::string::npos) << listing;
  EXPECT_NE(listing.find("src/"), std::string::npos) << listing;
  for (const char* hidden : {"transcripts", ".metainfer", "metrics.json", "summary.md"}) EXPECT_EQ(listing.find(hidden), std::string::npos) << listing;
  // Counted: in the sandbox, the log, the conversation and the run's metrics; the access log names the explorer only.
  std::map<std::string, int> rules;
  for (const Violation& v : w.agents->sandbox().violations()) {
    ++rules[v.rule];
    EXPECT_EQ(v.role, "implementer");
  }
  EXPECT_EQ(rules, (std::map<std::string, int>{{"workflow_record", 6}}));
  EXPECT_EQ(w.agents->metrics().conversations.back().violations, 6);
  ASSERT_EQ(w.agents->sandbox().reference_accesses().size(), 1u);
  EXPECT_EQ(w.agents->sandbox().reference_accesses()[0].role, "explorer");
}

// The same through the shell: naming a record is refused unrun; a path built at run time finds nothing (the records
// are mounted over) and, where strace audits commands, is counted; a recursive grep of the run directory finds
// nothing and is no violation (it names no record).
TEST(AgentWorkflowRecords, TheImplementersShellCannotReadThemEither) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths: " << command_isolation().description;
  ExploredRun w({tool_step("c1", "run_command", {{"command", "grep -o 'SECRET[A-Z_]*' transcripts/*.jsonl | head -3"}}),
                 tool_step("c2", "run_command", {{"command", "grep -rn SECRET_REFERENCE . ; ls -a; echo listed"}}),
                 tool_step("c3", "run_command", {{"command", "d=trans; cat ${d}cripts/explorer-001.jsonl; cat .meta$(echo infer)/reference_access.jsonl; true"}}),
                 tool_step("c4", "run_command", {{"command", "f=summ; cat ${f}ary.md; ln -s ../tran${f:0:0}scripts src/t && cat src/t/explorer-001.jsonl; true"}}),
                 done_step()});
  w.agents->converse("implementer", "Implement paged attention.");
  EXPECT_TRUE(w.server->failures().empty()) << ::testing::PrintToString(w.server->failures());
  const std::vector<json> results = w.implementer_results();
  ASSERT_EQ(results.size(), 4u);
  for (const json& r : results) {
    EXPECT_EQ(r["output"].get<std::string>().find(kSecret), std::string::npos) << r.dump();
    EXPECT_EQ(r["output"].get<std::string>().find("paged_attention"), std::string::npos) << r.dump();
  }
  EXPECT_TRUE(results[0]["violation"].get<bool>()) << results[0].dump();
  EXPECT_NE(results[0]["output"].get<std::string>().find("not run"), std::string::npos) << results[0].dump();
  EXPECT_FALSE(results[1]["violation"].get<bool>()) << results[1].dump();
  EXPECT_NE(results[1]["output"].get<std::string>().find("listed"), std::string::npos) << results[1].dump();
  // The symlink to transcripts/ is a protected path's link: undone and counted whatever the audit.
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.run / "src/t")));
  EXPECT_TRUE(results[3]["violation"].get<bool>()) << results[3].dump();
  std::map<std::string, int> rules;
  for (const Violation& v : w.agents->sandbox().violations()) ++rules[v.rule];
  EXPECT_EQ(rules["workflow_record"], command_audit_available() ? 1 + 2 + 2 : 1) << ::testing::PrintToString(rules);
  EXPECT_EQ(rules["symlink"], 1) << ::testing::PrintToString(rules);
  if (command_audit_available()) {
    EXPECT_TRUE(results[2]["violation"].get<bool>()) << results[2].dump();
    EXPECT_NE(results[2]["output"].get<std::string>().find("transcripts/explorer-001.jsonl"), std::string::npos) << results[2].dump();
  } else {
    EXPECT_NE(results[2]["output"].get<std::string>().find("not audited"), std::string::npos) << results[2].dump();
  }
}

// Roles still reach what they are told to read (ckb/roles/): the strategy, the exploration notes, the review, the
// failure analysis and the gate reports under reports/, by file tool and by shell.
TEST(AgentWorkflowRecords, RolesStillReadTheFilesTheyCommunicateThrough) {
  mi_test::TempDir dir("agents-records-roles");
  const fs::path run = dir / "run";
  const std::map<std::string, std::string> files = {
      {"strategy/strategy.md", "Route: evolution.\n"},        {"exploration/notes.md", "Blocks of 16 tokens.\n"},
      {"review/basic_execution-r0.md", "Shapes agree.\n"},     {"failure/analysis.md", "RMSNorm forgot 1/n.\n"},
      {"reports/basic_execution/round-0.txt", "FAILED: L1\n"}, {"ckb_delta/experience/x.md", "# x\n"},
      {"seed/failure.md", "Round 1 failed.\n"},                {"inputs/evolution.json", "{}\n"}};
  for (const auto& [path, text] : files) write(run / path, text);
  write(run / "transcripts/orchestrator-001.jsonl", "{}\n");
  write(run / "metrics.json", "{}\n");
  SandboxConfig sc;
  sc.run_dir = run;
  sc.ckb_dir = kCkb;
  sc.command_timeout_s = 30;
  ToolSandbox sb(sc);
  for (const char* role : {"implementer", "explorer", "consolidator", "failure_analyst", "spec_reviewer", "experiment_summariser", "orchestrator"})
    for (const auto& [path, text] : files) {
      const ToolOutcome r = sb.call(find_role(kRoles, role), "read_file", {{"path", path}});
      EXPECT_TRUE(r.ok) << role << " " << path << ": " << r.output;
      EXPECT_EQ(r.output, text) << role << " " << path;
    }
  const ToolOutcome reports = sb.call(find_role(kRoles, "failure_analyst"), "list_dir", {{"path", "reports/basic_execution"}});
  EXPECT_EQ(reports.output, "round-0.txt\n");
  if (command_isolation().hides_paths) {
    const ToolOutcome cat = sb.call(find_role(kRoles, "implementer"), "run_command",
                                    {{"command", "cat strategy/strategy.md reports/basic_execution/round-0.txt review/*.md; ls"}});
    EXPECT_TRUE(cat.ok) << cat.output;
    EXPECT_NE(cat.output.find("Route: evolution."), std::string::npos) << cat.output;
    EXPECT_NE(cat.output.find("FAILED: L1"), std::string::npos) << cat.output;
    EXPECT_NE(cat.output.find("Shapes agree."), std::string::npos) << cat.output;
    EXPECT_FALSE(cat.violation) << cat.output;
  }
  EXPECT_TRUE(sb.violations().empty()) << sb.violations().front().detail;
}

// Gate runs execute agent-written code: the records are hidden from them too, so a test that prints them leaks
// nothing into the evidence the next round's implementer is given.
TEST(AgentWorkflowRecords, GateRunsDoNotSeeThem) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "gates need an isolation that hides paths";
  mi_test::TempDir dir("agents-records-gate");
  const fs::path run = dir / "run";
  write(run / "transcripts/explorer-001.jsonl", std::string("{\"output\":\"") + kSecret + "\"}\n");
  write(run / ".metainfer/reference_access.jsonl", "{\"path\":\"/ref/vllm/SECRET_PATH.py\"}\n");
  write(run / "metrics.json", "{\"SECRET_METRIC\": 1}\n");
  write(run / "summary.md", "SECRET_SUMMARY\n");
  write(run / "gates/leak.sh", "cat transcripts/* .metainfer/* metrics.json summary.md; grep -r SECRET . ; ls -a transcripts .metainfer\n");
  const GateOutcome g = script_gate(30)(run, "leak");
  for (const char* leak : {kSecret, "SECRET_PATH", "SECRET_METRIC", "SECRET_SUMMARY", "explorer-001"})
    EXPECT_EQ(g.evidence.find(leak), std::string::npos) << leak << "\n" << g.evidence;
  // And the records themselves are untouched.
  EXPECT_EQ(slurp(run / "summary.md"), "SECRET_SUMMARY\n");
}

TEST(AgentWorkflowRecords, TheHiddenRecordsAreTheRecordsButTheGateReports) {
  for (const char* rel : {"transcripts", "transcripts/explorer-001.jsonl", ".metainfer", ".metainfer/violations.jsonl",
                          ".metainfer/stages/basic_execution.json", "metrics.json", "summary.md"})
    EXPECT_TRUE(is_hidden_record(rel)) << rel;
  for (const char* rel : {"reports/basic_execution/round-0.txt", "experiment/summary.md", "src/metrics.json", "strategy/strategy.md", "."})
    EXPECT_FALSE(is_hidden_record(rel)) << rel;
  for (const std::string& g : hidden_record_globs())
    EXPECT_NE(std::find(workflow_record_globs().begin(), workflow_record_globs().end(), g), workflow_record_globs().end()) << g;
}

}  // namespace
