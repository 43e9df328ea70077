// A command whose process is killed mid-run (here the whole `metainfer agents converse`, at a wall-clock limit) is
// still judged: its "before" snapshot is on disk, and the next sandbox opened on the run directory judges what it
// changed before any agent acts; until then no gate runs. Without that, an implementer could write outside its write
// paths (a CKB delta, a foreign source) and escape the judgement by getting killed.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/command_journal.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"
#include "common/error.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::call;
using agents_test::write;

TEST(AgentInterruptedCommand, IsJudgedWhenTheRunDirectoryIsOpenedAgain) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no confining isolation here";
  mi_test::TempDir dir("agents-interrupted");
  const fs::path run = dir / "run";
  write(run / "src/kernel.cpp", "int f() { return 1; }\n");
  write(run / "tests/stage_test.cpp", "TEST(Stage, Works) {}\n");
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  // The implementer writes the consolidator's delta and a foreign source, then outlives the process.
  const std::string cheat = "mkdir -p ckb_delta/contracts && echo 'id = \"planted\"' > ckb_delta/contracts/x.toml && "
                            "printf 'x = 1\\nimport vllm\\n' > src/copied.py && echo 'int g();' > src/ok.h && sleep 60";
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"respond", {{"tool_calls", {call("c", "run_command", {{"command", cheat}, {"timeout_s", 120}})}}, {"usage", {{"input", 10}, {"output", 1}}}}}},
  })}});
  const auto killed = mi_test::metainfer({"agents", "converse", "--role", "implementer", "--run-dir", run.string(), "--task", "Go.",
                                          "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted"},
                                         8);
  ASSERT_TRUE(killed.timed_out) << killed.out << killed.err;
  ASSERT_TRUE(fs::exists(run / "ckb_delta/contracts/x.toml"));  // the command got that far
  ASSERT_TRUE(fs::exists(command_journal_path(run)));
  // No gate runs on the unjudged changes.
  EXPECT_THROW(require_untampered(run), mi::Error);

  SandboxConfig c;
  c.run_dir = run;
  c.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  c.source_switch = SourceSwitch::on;  // opened as an explorer phase would be: the command ran with it OFF
  const ToolSandbox sb(c);
  EXPECT_FALSE(fs::exists(run / "ckb_delta/contracts/x.toml"));
  EXPECT_FALSE(fs::exists(run / "src/copied.py"));
  EXPECT_TRUE(fs::exists(run / "src/ok.h"));  // in the implementer's write paths, no signature: it stands
  std::map<std::string, int> rules;
  for (const auto& v : sb.violations()) {
    ++rules[v.rule];
    EXPECT_NE(v.detail.find("interrupted"), std::string::npos) << v.detail;
    EXPECT_EQ(v.role, "implementer");
  }
  EXPECT_EQ(rules, (std::map<std::string, int>{{"foreign_signature", 1}, {"write_not_granted", 1}}));
  EXPECT_FALSE(fs::exists(command_journal_path(run)));
  EXPECT_NO_THROW(require_untampered(run));
}

TEST(AgentInterruptedCommand, TheJournalKeepsBytesThatAreNotText) {
  mi_test::TempDir dir("agents-journal");
  RunDirSnapshot s;
  s["bin/x"] = SnapshotEntry{std::string("\0\xff\xfe", 3), false, 2, false, false};
  s["l"] = SnapshotEntry{"../x", true, 1, false, true};
  write_command_journal(dir.path(), {"implementer", "make", true, s, SourceSwitch::on});
  const auto j = read_command_journal(dir.path());
  ASSERT_TRUE(j);
  EXPECT_EQ(j->role, "implementer");
  EXPECT_TRUE(j->git_existed);
  EXPECT_EQ(j->source_switch, SourceSwitch::on);
  EXPECT_EQ(j->before, s);
  clear_command_journal(dir.path());
  EXPECT_FALSE(read_command_journal(dir.path()));
}

}  // namespace
