// What agent-written code writes while a gate runs it is judged like an agent's command (gate_watch.h): a gate
// script's callee or a static initializer linked into the stage tests that rewrites the plan, plants a CKB delta or
// the explorer's notes, or edits a source makes the gate FAIL, each change is a counted violation, and each is
// undone; a gate killed mid-run leaves its journal, and its changes are judged when the run directory is opened
// again. The plan the final gates read is protected and hashed. The honest path still passes.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "../toolkit_support.h"
#include "agents/command_journal.h"
#include "agents/engine_gate.h"
#include "agents/gate_watch.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"
#include "common/error.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;
using agents_test::step;
using agents_test::text;
using agents_test::write;

const char* kPlan = agents_test::kSmallEnginePlan;

// What the reviewer's reproduction planted (issue 12): the implementer writes src/check.sh, the protected gate script
// runs it, and it rewrites the plan, plants a CKB delta and the explorer's notes, and rewrites another source.
const char* kCheat = "echo '{\"constraints\": {\"max_context\": 2}}' > plan.json 2>/dev/null\n"
                     "mkdir -p ckb_delta exploration\n"
                     "echo 'id = \"planted\"' > ckb_delta/x.toml\n"
                     "echo planted > exploration/notes.md\n"
                     "echo gate-time > src/other.cpp\n"
                     "exit 0\n";

// A run directory as the workflow lays it down: a gate script that runs the implementer's src/check.sh, a test
// contract and the plan, hashed.
struct GateWorld {
  mi_test::TempDir dir{"agents-gate-writes"};
  fs::path run = dir / "run";
  explicit GateWorld(const std::string& gate_tail = "") {
    write(run / "gates/s1.sh", "bash src/check.sh || exit 1\n" + gate_tail);
    write(run / "tests/contract.txt", "src/check.sh exits 0\n");
    write(run / "plan.json", kPlan);
    write(run / "src/other.cpp", "int other() { return 1; }\n");
    write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  }
  AgentRun make_run(const mi_test::ScriptedLlmServer& server) const { return agents_test::scripted_run(run, server); }
  void expect_nothing_planted() const {
    EXPECT_EQ(slurp(run / "plan.json"), kPlan);
    EXPECT_FALSE(fs::exists(run / "ckb_delta/x.toml"));
    EXPECT_FALSE(fs::exists(run / "exploration/notes.md"));
    EXPECT_EQ(slurp(run / "src/other.cpp"), "int other() { return 1; }\n");
  }
};

std::set<std::string> gate_write_paths(const std::vector<Violation>& violations) {
  std::set<std::string> out;
  for (const auto& v : violations) {
    EXPECT_EQ(v.rule, "gate_write") << v.path << ": " << v.detail;
    EXPECT_EQ(v.role, "gate");
    out.insert(v.path);
  }
  return out;
}

const std::set<std::string> kPlanted = {"ckb_delta/x.toml", "exploration/notes.md", "src/other.cpp"};

// (a) The gate script's callee plants files: the gate FAILS naming them, each is a counted violation and undone, and
// the plan (protected now) was never writable. The next round's implementer gets that evidence, makes its check
// honest, and the same gate passes.
TEST(AgentGateWrites, WhatAGateScriptsCalleeWritesFailsTheGateIsCountedAndUndone) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "gates run confined; not here";
  GateWorld w;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      step({{"tool_calls", {call("w", "write_file", {{"path", "src/check.sh"}, {"content", kCheat}})}}}),
      step(text("The check is in place.")),
      step({{"tool_calls", {call("w2", "write_file", {{"path", "src/check.sh"}, {"content", "exit 0\n"}})}}},
           {{"body_contains", {"round 1", "gate_write", "ckb_delta/x.toml", "exploration/notes.md", "src/other.cpp"}}}),
      step(text("The check no longer writes anything.")),
  })}});
  AgentRun run = w.make_run(server);
  const StageResult r = run_stage(run, {"s1", "Make src/check.sh exit 0.", 1, false}, script_gate(30));
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(server.steps_left(), 0u);
  ASSERT_EQ(r.rounds.size(), 2u) << r.detail;
  EXPECT_EQ(r.rounds[0].gate, "FAILED");  // the script exited 0: only what its callee wrote failed it
  EXPECT_EQ(r.rounds[1].gate, "PASSED");
  EXPECT_EQ(r.state, "PASSED");
  const std::string evidence = slurp(w.run / "reports/s1/round-0.txt");
  for (const auto& p : kPlanted) EXPECT_NE(evidence.find(p), std::string::npos) << p << "\n" << evidence;
  EXPECT_NE(evidence.find("exit status 0"), std::string::npos) << evidence;
  w.expect_nothing_planted();
  EXPECT_EQ(gate_write_paths(run.sandbox().violations()), kPlanted);
  const json metrics = json::parse(slurp(w.run / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["violations"], kPlanted.size());
  EXPECT_NO_THROW(require_untampered(w.run));
  EXPECT_FALSE(fs::exists(command_journal_path(w.run)));
}

// The same script gate called on its own: it fails, undoes, and hands the violations to its caller; a plan created
// where none was (a run directory without one) is a gate_write too.
TEST(AgentGateWrites, TheScriptGateReturnsItsViolations) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "gates run confined; not here";
  GateWorld w;
  fs::remove(w.run / "plan.json");
  write_protected_manifest(protected_manifest_path(w.run), snapshot_protected(w.run, default_protected_globs()));
  write(w.run / "src/check.sh", kCheat);
  const GateOutcome g = script_gate(30)(w.run, "s1");
  EXPECT_FALSE(g.passed) << g.evidence;
  std::set<std::string> expected = kPlanted;
  expected.insert("plan.json");
  EXPECT_EQ(gate_write_paths(g.violations), expected) << g.evidence;
  EXPECT_FALSE(fs::exists(w.run / "plan.json"));
  EXPECT_FALSE(fs::exists(w.run / "ckb_delta/x.toml"));
  EXPECT_NO_THROW(require_untampered(w.run));
}

// The shared judge on its own (no isolation needed): what a gate may write is its build trees; every other change is
// undone and a violation, a link out of the run directory is refused in the build trees too, and the journal written
// before the gate is gone afterwards. While a journal is there no other gate starts, and one left unjudged (the process
// died) is judged by the gate's rule when a sandbox opens the run directory.
TEST(AgentGateWrites, AGatesChangesAreJudgedByOneRuleAlsoAfterAnInterruption) {
  mi_test::TempDir dir("agents-gate-watch");
  const fs::path run = dir / "run";
  write(run / "src/a.cpp", "int a() { return 1; }\n");
  write(run / "src/b.cpp", "int b() { return 2; }\n");
  write(run / "build/old.o", "old\n");
  auto act_as_gate = [&] {
    write(run / "build/x.o", "object\n");                   // the gate's build: allowed
    write(run / "src/a.cpp", "int a() { return 3; }\n");      // rewritten
    fs::remove(run / "src/b.cpp");                            // removed
    write(run / "plan.json", "{\"constraints\": {\"max_context\": 2}}\n");  // created
    fs::create_symlink("/etc/passwd", run / "build/leak");    // a link out, in a build tree
  };
  auto expect_undone = [&] {
    EXPECT_EQ(slurp(run / "src/a.cpp"), "int a() { return 1; }\n");
    EXPECT_EQ(slurp(run / "src/b.cpp"), "int b() { return 2; }\n");
    EXPECT_FALSE(fs::exists(run / "plan.json"));
    EXPECT_FALSE(fs::is_symlink(run / "build/leak"));
    EXPECT_EQ(slurp(run / "build/x.o"), "object\n");
    EXPECT_FALSE(fs::exists(command_journal_path(run)));
  };
  const std::map<std::string, std::string> expected = {
      {"build/leak", "symlink"}, {"plan.json", "gate_write"}, {"src/a.cpp", "gate_write"}, {"src/b.cpp", "gate_write"}};
  {
    GateWatch watch(run, "gates/s1.sh");
    ASSERT_TRUE(fs::exists(command_journal_path(run)));
    EXPECT_THROW(GateWatch(run, "gates/s2.sh"), mi::Error);  // no gate starts on unjudged changes
    act_as_gate();
    std::map<std::string, std::string> rules;
    for (const auto& v : watch.judge()) {
      rules[v.path] = v.rule;
      EXPECT_EQ(v.role, "gate");
      EXPECT_NE(v.detail.find("undone"), std::string::npos) << v.detail;
    }
    EXPECT_EQ(rules, expected);
    expect_undone();
  }
  // Interrupted: the watch is never asked to judge (its process died mid-gate).
  fs::remove(run / "build/x.o");
  { GateWatch interrupted(run, "gates/s1.sh"); }
  act_as_gate();
  ASSERT_TRUE(fs::exists(command_journal_path(run)));
  const auto journal = read_command_journal(run);
  ASSERT_TRUE(journal);
  EXPECT_TRUE(journal->gate);
  SandboxConfig c;
  c.run_dir = run;
  const ToolSandbox sb(c);
  std::map<std::string, std::string> rules;
  for (const auto& v : sb.violations()) {
    rules[v.path] = v.rule;
    EXPECT_EQ(v.role, "gate");
    EXPECT_NE(v.detail.find("interrupted"), std::string::npos) << v.detail;
  }
  EXPECT_EQ(rules, expected);
  expect_undone();
}

// A gate killed mid-run (here the whole `metainfer agents stage`, at a wall-clock limit, while the gate script sleeps
// after its callee planted the files): no gate runs on what it left, and the next sandbox opened on the run directory
// judges it by the gate's rule.
TEST(AgentGateWrites, AGateKilledMidRunIsJudgedWhenTheRunDirectoryIsOpenedAgain) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "gates run confined; not here";
  GateWorld w("sleep 120\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      step({{"tool_calls", {call("w", "write_file", {{"path", "src/check.sh"}, {"content", kCheat}})}}}),
      step(text("The check is in place.")),
  })}});
  const auto killed = mi_test::metainfer({"agents", "stage", "--run-dir", w.run.string(), "--stage", "s1", "--objective", "Go.",
                                          "--max-repair-rounds", "0", "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted"},
                                         12);
  ASSERT_TRUE(killed.timed_out) << killed.out << killed.err;
  ASSERT_TRUE(fs::exists(w.run / "ckb_delta/x.toml"));  // the gate got that far
  ASSERT_TRUE(fs::exists(command_journal_path(w.run)));
  EXPECT_THROW(require_untampered(w.run), mi::Error);

  SandboxConfig c;
  c.run_dir = w.run;
  c.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  const ToolSandbox sb(c);
  w.expect_nothing_planted();
  EXPECT_EQ(gate_write_paths(sb.violations()), kPlanted);
  for (const auto& v : sb.violations()) EXPECT_NE(v.detail.find("interrupted"), std::string::npos) << v.detail;
  EXPECT_FALSE(fs::exists(command_journal_path(w.run)));
  EXPECT_NO_THROW(require_untampered(w.run));
}

// The plan the final gates read is laid down by the generator before any agent acts: protected (no tool writes it)
// and hashed (a change by any route stops the next gate).
TEST(AgentGateWrites, ThePlanIsProtectedAndHashed) {
  GateWorld w;
  const auto& globs = default_protected_globs();
  EXPECT_NE(std::find(globs.begin(), globs.end(), "plan.json"), globs.end());
  SandboxConfig c;
  c.run_dir = w.run;
  c.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  ToolSandbox sb(c);
  const AgentRoleSpec orchestrator = find_role(c.ckb_dir / "roles", "orchestrator");
  const ToolOutcome o = sb.call(orchestrator, "write_file", {{"path", "plan.json"}, {"content", "{}"}});
  EXPECT_TRUE(o.violation) << o.output;
  EXPECT_EQ(sb.violations().back().rule, "protected_path");
  EXPECT_EQ(slurp(w.run / "plan.json"), kPlan);
  write(w.run / "plan.json", "{\"constraints\": {\"max_context\": 2}}\n");
  try {
    require_untampered(w.run);
    ADD_FAILURE() << "a changed plan.json was not caught";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified plan.json"), std::string::npos) << e.what();
  }
}

// A small engine directory for the real verifier (agents_test::write_small_engine), its checkpoint an empty directory.
void write_small_engine(const fs::path& dir, const fs::path& run) {
  fs::create_directories(dir / "model");
  agents_test::write_small_engine(run, dir / "model");
}

// (b) The engine stage gate, with the real verifier on a small engine directory: the test contract links the
// implementer's source, whose static initializer writes into the run directory when the stage test starts. The stage
// test passes and the verifier says PASSED; the gate still FAILS, naming the files, which are undone. The same
// engine without the initializer passes (what the verifier itself writes, build/, is the gate's own).
TEST(AgentGateWrites, AStaticInitializerInAgentSourcesFailsTheEngineStageGate) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "gates run confined; not here";
  mi_test::TempDir dir("agents-gate-writes-engine");
  const fs::path run = dir / "engine";
  write_small_engine(dir.path(), run);
  write(run / "src/answer.cpp", "int answer() { return 42; }\n");
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  const GateRunner gate = engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 600});

  const GateOutcome honest = gate(run, "basic_execution");
  EXPECT_TRUE(honest.passed) << honest.evidence;
  EXPECT_TRUE(honest.violations.empty()) << honest.evidence;

  write(run / "src/answer.cpp", "#include <filesystem>\n#include <fstream>\n"
                                "namespace {\nstruct Plant {\n  Plant() {\n"
                                "    std::ofstream(\"plan.json\") << \"{\\\"constraints\\\": {\\\"max_context\\\": 2}}\";\n"
                                "    std::filesystem::create_directories(\"ckb_delta\");\n"
                                "    std::ofstream(\"ckb_delta/x.toml\") << \"id = 1\";\n"
                                "    std::filesystem::create_directories(\"exploration\");\n"
                                "    std::ofstream(\"exploration/notes.md\") << \"planted\";\n"
                                "  }\n} plant;\n}  // namespace\n"
                                "int answer() { return 42; }\n");
  const GateOutcome planted = gate(run, "basic_execution");
  EXPECT_FALSE(planted.passed) << planted.evidence;
  EXPECT_NE(planted.evidence.find("PASSED L1_stage:basic_execution"), std::string::npos) << planted.evidence;  // the verifier passed it
  EXPECT_EQ(gate_write_paths(planted.violations), (std::set<std::string>{"ckb_delta/x.toml", "exploration/notes.md"})) << planted.evidence;
  for (const char* p : {"ckb_delta/x.toml", "exploration/notes.md"}) EXPECT_NE(planted.evidence.find(p), std::string::npos) << planted.evidence;
  EXPECT_EQ(slurp(run / "plan.json"), kPlan);  // read-only to the gate
  EXPECT_FALSE(fs::exists(run / "ckb_delta/x.toml"));
  EXPECT_FALSE(fs::exists(run / "exploration/notes.md"));
  EXPECT_NO_THROW(require_untampered(run));
}

// The engine stage gate's verdict cannot be rewritten by the code it judges: when the stage test runs, no other
// process of the sandbox (a wrapper shell, tail, bubblewrap's reaper, the verifier) can be opened for writing through
// /proc/PID/mem or seized with ptrace, the way a review forged a PASSED report and exit status 0. The planted source
// looks for any such process and prints what it reached; its answer is wrong, so the real verdict is FAILED.
TEST(AgentGateWrites, TheCodeUnderTestCannotReachTheProcessesThatCarryTheVerdict) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the verifier runs without a shell only under bubblewrap";
  mi_test::TempDir dir("agents-gate-forge");
  const fs::path run = dir / "engine";
  write_small_engine(dir.path(), run);
  write(run / "src/answer.cpp", R"CPP(#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
namespace {
struct Probe {
  Probe() {
    const pid_t self = getpid();
    DIR* d = opendir("/proc");
    if (!d) return;
    while (dirent* e = readdir(d)) {
      const pid_t p = atoi(e->d_name);
      if (p <= 0 || p == self) continue;
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/mem", p);
      const int fd = open(path, O_RDWR);
      if (fd >= 0) { printf("REACHABLE mem pid=%d\n", p); close(fd); }
      if (ptrace(PTRACE_SEIZE, p, 0, 0) == 0) { printf("REACHABLE ptrace pid=%d\n", p); ptrace(PTRACE_DETACH, p, 0, 0); }
    }
    closedir(d);
    fflush(stdout);
  }
} probe;
}  // namespace
int answer() { return 41; }
)CPP");
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  const GateOutcome g = engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 600})(run, "basic_execution");
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_NE(g.evidence.find("FAILED L1_stage:basic_execution"), std::string::npos) << g.evidence;
  EXPECT_EQ(g.evidence.find("REACHABLE"), std::string::npos) << g.evidence;
}

}  // namespace
