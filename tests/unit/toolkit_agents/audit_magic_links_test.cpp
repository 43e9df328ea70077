// The audit follows procfs' and /dev's magic links as the kernel does (found by review 7 of issue 12): a reach for a
// hidden tree through /proc/self/fd/N/.., /dev/fd/N/.., /proc/self/{cwd,root}/.., a task's root or /dev/stdin counts,
// in agents' commands and in gates alike; ordinary commands through descriptors and the merged-/usr links (process
// substitution, /lib, a cmake + ninja build) do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/command_audit.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents/system_references.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";

std::string rules(const std::vector<Violation>& violations) {
  std::string s;
  for (const Violation& v : violations) s += v.rule + " " + v.path + ": " + v.detail + "\n";
  return s;
}

// A run directory with a record, and a reference checkout beside it (dir/reference).
struct MagicLinkRun {
  mi_test::TempDir tmp{"magic-links"};
  fs::path dir = fs::canonical(tmp.path()), run = dir / "run", ref = dir / "reference";
  MagicLinkRun() {
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    write(run / "transcripts/explorer-001.jsonl", "{\"output\":\"SECRET_TRANSCRIPT\"}\n");
    write(ref / "vllm/x.py", "SECRET_REFERENCE = 1\n");
  }
  SandboxConfig config() const {
    SandboxConfig c;
    c.run_dir = run;
    c.reference_paths = {ref};
    c.command_timeout_s = 120;
    return c;
  }
};

// The kernel follows a magic link (/proc/<pid>/fd/N, /dev/fd/N, /proc/<pid>/{root,cwd}, /dev/stdin) before it resolves
// the '..' after it; the audit resolves '..' lexically first (normal(), before unproc() and through_descriptor()), so
// "/proc/self/fd/3/../reference/vllm/x.py" is judged as "/proc/self/fd/reference/vllm/x.py": neither a descriptor path
// with a number in it nor a path in a hidden tree, and the only_within filter drops it. Likewise the per-thread
// magic links /proc/<pid>/task/<tid>/{root,cwd} (unproc() knows /proc/<pid>/{root,cwd} only), and /dev/stdin (a link
// to /proc/self/fd/0, which through_descriptor() does not know). Each command reaches into the hidden reference
// tree (the mount holds: nothing read) and is not counted.
std::vector<std::string> cheats(const MagicLinkRun& w) {
  const std::string tail = "/refer$(echo ence)/vllm/x.py; true";
  return {
      "exec 3<" + w.run.string() + "; cat /proc/self/fd/3/.." + tail,
      "exec 3<" + w.run.string() + "; cat /dev/fd/3/.." + tail,
      "cat /proc/self/cwd/.." + tail,                                    // the command runs in the run directory
      "cat /proc/self/root/.." + w.dir.string() + tail,
      "cat /proc/$$/task/$$/root" + w.dir.string() + tail,
      "cat /dev/stdin" + tail.substr(0, tail.size() - 6) + " < " + w.dir.string() + "; true",
  };
}

TEST(AgentAuditMagicLinks, AnImplementersCommandReachingThroughAMagicLinkIsCounted) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  MagicLinkRun w;
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  // The control: the plain built path counts.
  {
    ToolSandbox sb(w.config());
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", "cat " + w.dir.string() + "/refer$(echo ence)/vllm/x.py; true"}});
    ASSERT_TRUE(r.violation) << r.output;
  }
  for (const std::string& command : cheats(w)) {
    ToolSandbox sb(w.config());
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", command}});
    EXPECT_EQ(r.output.find("SECRET"), std::string::npos) << command << "\n" << r.output;  // the mount holds
    EXPECT_TRUE(r.violation) << command << "\n" << r.output;
    EXPECT_FALSE(sb.violations().empty()) << command;
  }
}

// The same for a script gate's callee (agent-written src/check.sh): the gate passes with no violation.
TEST(AgentAuditMagicLinks, AGatesCalleeReachingThroughAMagicLinkIsCounted) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  for (std::size_t i = 0;; ++i) {
    MagicLinkRun w;
    const std::vector<std::string> all = cheats(w);
    if (i == all.size()) break;
    fs::remove_all(w.run / "transcripts");
    write(w.run / "gates/s1.sh", "bash src/check.sh; exit 0\n");
    write(w.run / "src/check.sh", all[i] + "\n");
    write_protected_manifest(protected_manifest_path(w.run), snapshot_protected(w.run, default_protected_globs()));
    const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
    EXPECT_EQ(g.evidence.find("SECRET"), std::string::npos) << g.evidence;
    EXPECT_FALSE(g.passed) << all[i] << "\n" << g.evidence;
    EXPECT_FALSE(g.violations.empty()) << all[i] << "\n" << rules(g.violations) << g.evidence;
  }
}

// Honest use after the fixes: process substitution (/dev/fd/63 with nothing after it), descriptor listings, /lib
// aliases and a CMake + Ninja build are not counted.
TEST(AgentAuditMagicLinks, OrdinaryCommandsThroughDescriptorsAndAliasesAreNotCounted) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  MagicLinkRun w;
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  write(w.run / "src/CMakeLists.txt", "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\nadd_executable(p a.cpp)\n");
  write(w.run / "src/a.cpp", "#include <iostream>\nint main() { std::cout << 42 << \"\\n\"; }\n");
  for (const std::string command :
       {"cat <(echo x)", "diff <(ls) <(ls)", "paste <(echo a) <(echo b)", "echo hi | tee >(wc -c) > /dev/null; sleep 0.2",
        "ls -l /proc/self/fd/ /dev/fd/ > /dev/null", "readlink /proc/self/fd/0 /dev/stdin > /dev/null; true",
        "ls /lib /lib64 /bin > /dev/null; cat /lib/os-release > /dev/null; true", "python3 -c 'import json, os; print(os.getcwd())'",
        "rm -rf build && cmake -S src -B build -G Ninja > /dev/null && cmake --build build > /dev/null && ./build/p"}) {
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", command}});
    EXPECT_FALSE(r.violation) << command << "\n" << r.output;
  }
  EXPECT_TRUE(sb.violations().empty()) << rules(sb.violations());
}


}  // namespace
