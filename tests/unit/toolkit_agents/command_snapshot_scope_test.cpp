// What a command changes is judged everywhere in the run directory: in the build trees and .git (links only; .git is
// read-only to commands) and in files over 64 MiB (by fingerprint; the existing ones are read-only to commands), which
// the snapshot used to leave out altogether.
#include <gtest/gtest.h>

#include <map>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/isolated_command.h"
#include "agents/run_dir_snapshot.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::slurp;
using agents_test::write;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";

struct ScopeRun {
  mi_test::TempDir dir{"agents-snapscope"};
  fs::path run = dir / "run";
  ScopeRun() {
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    write(run / "tests/stage_test.cpp", "TEST(Stage, Works) {}\n");
    write(run / ".git/config", "[core]\n\tbare = false\n");
    write(run / "build/CMakeCache.txt", "cache\n");
    write(run / "src/weights.bin", std::string((std::size_t(64) << 20) + 1, '\0'));  // over 64 MiB, in a write path
    write(dir / "outside/secret.cpp", "int secret();\n");
  }
  ToolSandbox sandbox() const {
    SandboxConfig c;
    c.run_dir = run;
    c.command_timeout_s = 60;
    return ToolSandbox(c);
  }
};

std::map<std::string, int> rules(const ToolSandbox& sb) {
  std::map<std::string, int> r;
  for (const auto& v : sb.violations()) ++r[v.rule];
  return r;
}

TEST(AgentCommandSnapshotScope, LinksInBuildTreesAreJudged) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  ScopeRun w;
  ToolSandbox sb = w.sandbox();
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const std::string outside = (fs::canonical(w.dir.path()) / "outside/secret.cpp").string();
  const ToolOutcome r = sb.call(impl, "run_command", {{"command", "ln -s " + outside + " build/secret.cpp; ln -s ../tests/stage_test.cpp build/contract.cpp; "
                                                                   "ln -s ../src/kernel.cpp build/kernel.cpp; echo rebuilt > build/CMakeCache.txt"}});
  EXPECT_TRUE(r.violation) << r.output;
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.run / "build/secret.cpp")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.run / "build/contract.cpp")));
  EXPECT_TRUE(fs::is_symlink(w.run / "build/kernel.cpp"));  // inside and clear of protected paths: allowed
  EXPECT_EQ(slurp(w.run / "build/CMakeCache.txt"), "rebuilt\n");  // ordinary build writes are free
  EXPECT_EQ(rules(sb), (std::map<std::string, int>{{"symlink", 2}}));
  EXPECT_EQ(r.edits, 0);  // nothing in a build tree is an edit of the sources
}

TEST(AgentCommandSnapshotScope, GitIsReadOnlyToCommands) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  ScopeRun w;
  ToolSandbox sb = w.sandbox();
  sb.call(find_role(kRoles, "implementer"), "run_command",
          {{"command", "echo '[alias] x = !sh' >> .git/config; mkdir -p .git/hooks; echo evil > .git/hooks/post-checkout"}});
  EXPECT_EQ(slurp(w.run / ".git/config"), "[core]\n\tbare = false\n");
  EXPECT_FALSE(fs::exists(w.run / ".git/hooks/post-checkout"));
}

TEST(AgentCommandSnapshotScope, FilesOverTheSnapshotLimitAreJudgedAndExistingOnesCannotChange) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  ScopeRun w;
  ToolSandbox sb = w.sandbox();
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  // A large file outside the role's write paths is seen (by its fingerprint) and removed.
  const ToolOutcome big = sb.call(impl, "run_command", {{"command", "head -c 70000000 /dev/zero > planted.bin"}});
  EXPECT_TRUE(big.violation) << big.output;
  EXPECT_FALSE(fs::exists(w.run / "planted.bin"));
  EXPECT_EQ(rules(sb), (std::map<std::string, int>{{"write_not_granted", 1}}));
  // An existing large file, even in a write path, is read-only to commands: its content could not be restored.
  const auto size = fs::file_size(w.run / "src/weights.bin");
  sb.call(impl, "run_command", {{"command", "echo x >> src/weights.bin; ln src/weights.bin build/w.bin"}});
  EXPECT_EQ(fs::file_size(w.run / "src/weights.bin"), size);
  EXPECT_EQ(fs::hard_link_count(w.run / "src/weights.bin"), 1u);
  // A large file created in a write path is an edit.
  const ToolOutcome ok = sb.call(impl, "run_command", {{"command", "head -c 70000000 /dev/zero > src/table.bin"}});
  EXPECT_FALSE(ok.violation) << ok.output;
  EXPECT_EQ(ok.edits, 1);
}

// The snapshot itself: fingerprints for large files and for the files of scratch trees.
TEST(AgentCommandSnapshotScope, SnapshotEntriesByKind) {
  ScopeRun w;
  const RunDirSnapshot s = snapshot_run_dir(w.run);
  ASSERT_TRUE(s.count("src/weights.bin"));
  EXPECT_TRUE(s.at("src/weights.bin").fingerprint);
  EXPECT_LT(s.at("src/weights.bin").bytes.size(), 200u);
  ASSERT_TRUE(s.count(".git/config"));
  EXPECT_TRUE(s.at(".git/config").scratch);
  ASSERT_TRUE(s.count("build/CMakeCache.txt"));
  EXPECT_TRUE(s.at("build/CMakeCache.txt").scratch);
  EXPECT_EQ(large_files(w.run, s), std::vector<fs::path>{w.run / "src/weights.bin"});
  // A content change in a scratch tree is a change (judged for links and signatures only), and so is a new hard link.
  write(w.run / "build/CMakeCache.txt", "other\n");
  const auto rewritten = changed_files(s, snapshot_run_dir(w.run));
  ASSERT_EQ(rewritten.size(), 1u);
  EXPECT_TRUE(rewritten[0].scratch());
  fs::create_hard_link(w.run / "build/CMakeCache.txt", w.run / "build/again.txt");
  const auto changes = changed_files(s, snapshot_run_dir(w.run));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].path, "build/CMakeCache.txt");
  EXPECT_EQ(changes[1].path, "build/again.txt");
}

}  // namespace
