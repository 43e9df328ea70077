// The build trees and .git against planted cheats: a file a command writes into a build tree is judged for foreign
// signatures (the build trees used to be compared for links only), a .git the command creates is judged like any
// other path (it used to be a scratch tree whatever made it), and a script gate never runs what a build tree held.
#include <gtest/gtest.h>

#include <map>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/isolated_command.h"
#include "agents/run_dir_snapshot.h"
#include "agents/stage_loop.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";

struct ScratchRun {
  mi_test::TempDir dir{"agents-scratch"};
  fs::path run = dir / "run";
  ScratchRun() { write(run / "src/kernel.cpp", "int f() { return 1; }\n"); }
  ToolSandbox sandbox() const {
    SandboxConfig c;
    c.run_dir = run;
    c.command_timeout_s = 60;
    c.source_switch = SourceSwitch::off;
    return ToolSandbox(c);
  }
};

std::map<std::string, int> rules(const ToolSandbox& sb) {
  std::map<std::string, int> r;
  for (const auto& v : sb.violations()) ++r[v.rule];
  return r;
}

TEST(AgentCommandScratchTrees, AForeignSignatureWrittenIntoABuildTreeIsRefusedAndRemoved) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  ScratchRun w;
  ToolSandbox sb = w.sandbox();
  const ToolOutcome r = sb.call(find_role(kRoles, "implementer"), "run_command",
                                {{"command", "mkdir -p build-x && printf 'x = 1\\nimport vllm\\n' > build-x/copied.py && echo ok > build-x/out.o"}});
  EXPECT_TRUE(r.violation) << r.output;
  EXPECT_FALSE(fs::exists(w.run / "build-x/copied.py"));
  EXPECT_TRUE(fs::exists(w.run / "build-x/out.o"));  // ordinary build output stays, and is no edit
  EXPECT_EQ(rules(sb), (std::map<std::string, int>{{"foreign_signature", 1}}));
  EXPECT_EQ(r.edits, 0);
}

TEST(AgentCommandScratchTrees, ANewGitDirectoryIsJudgedLikeAnyOtherPath) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  ScratchRun w;
  ToolSandbox sb = w.sandbox();
  const ToolOutcome r = sb.call(find_role(kRoles, "implementer"), "run_command",
                                {{"command", "mkdir -p .git/hooks && echo '#define X 1' > .git/stash.h && echo evil > .git/hooks/post-checkout"}});
  EXPECT_TRUE(r.violation) << r.output;
  EXPECT_FALSE(fs::exists(w.run / ".git/stash.h"));
  EXPECT_FALSE(fs::exists(w.run / ".git/hooks/post-checkout"));
  EXPECT_EQ(rules(sb), (std::map<std::string, int>{{"write_not_granted", 2}}));
}

TEST(AgentCommandScratchTrees, ScriptGatesRunWithoutTheAgentsBuildTrees) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no confining isolation here";
  ScratchRun w;
  // A result planted where the gate's own build would put it: the gate must not find it.
  write(w.run / "build/stage_passed", "yes\n");
  write(w.run / "build-old/stage_passed", "yes\n");
  write(w.run / "gates/stage.sh", "test -e build/stage_passed || test -e build-old/stage_passed\n");
  const GateOutcome g = script_gate(30, 16 * 1024, {})(w.run, "stage");
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_FALSE(fs::exists(w.run / "build"));
  EXPECT_TRUE(fs::exists(w.run / "src/kernel.cpp"));
}

TEST(AgentCommandScratchTrees, SnapshotsSeeRewritesInBuildTreesAndANewGit) {
  ScratchRun w;
  write(w.run / "build/CMakeCache.txt", "cache\n");
  const RunDirSnapshot before = snapshot_run_dir(w.run, false);
  write(w.run / "build/CMakeCache.txt", "CMAKE_CXX_FLAGS=-include evil.h\n");
  write(w.run / ".git/config", "[core]\n");
  const auto changes = changed_files(before, snapshot_run_dir(w.run, false));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].path, ".git/config");
  EXPECT_FALSE(changes[0].scratch());  // .git was not there before: not scratch
  EXPECT_EQ(changes[1].path, "build/CMakeCache.txt");
  EXPECT_TRUE(changes[1].scratch());
}

}  // namespace
