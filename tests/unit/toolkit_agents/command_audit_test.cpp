// Every refused access of a shell command counts, not only those whose path the command spells out: commands run under
// an strace audit (command_audit.h), and a hidden path (a reference tree, a signature file, a workflow record) reached
// by a path built at run time is a violation. Ordinary commands (a recursive grep, a glob at the top of the run
// directory, a build) reach past the hidden paths without counting.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/command_audit.h"
#include "agents/isolated_command.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::ForcedEnv;
using agents_test::write;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";
constexpr const char* kTag = "mi-audit-0123456789abcdef";

std::vector<FileAccess> parse(const std::string& log, const fs::path& root_prefix = {}) {
  std::istringstream in(log);
  return audited_accesses(in, kTag, "/run", root_prefix);
}

std::vector<std::string> shown(const std::vector<FileAccess>& accesses) {
  std::vector<std::string> out;
  for (const FileAccess& a : accesses)
    out.push_back(a.call + " " + a.path.string() + (a.walk ? " walk" : "") + (a.stat_only ? " stat" : ""));
  return out;
}

// A log in the shape strace -f -y writes it: the isolation's set-up first (its paths are not the command's), then the
// tagged shell and what the command's processes named.
TEST(AgentCommandAudit, ParsesTheCommandsAccessesOutOfAnStraceLog) {
  const std::string log =
      "100 execve(\"/usr/bin/bwrap\", [\"bwrap\", \"--tmpfs\", \"/ref/vllm\"], 0x7ffc /* 37 vars */) = 0\n"
      "101 newfstatat(AT_FDCWD</>, \"/ref/vllm\", {st_mode=S_IFDIR|0755, st_size=4096, ...}, 0) = 0\n"
      "101 mount(\"tmpfs\", \"/newroot/ref/vllm\", \"tmpfs\", MS_NOSUID|MS_NODEV, \"mode=0755\") = 0\n"
      "102 openat(AT_FDCWD</run>, \"/ref/vllm/setup.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "102 execve(\"/bin/bash\", [\"/bin/bash\", \"-c\", \": mi-audit-0123456789abcdef; set\"...], 0x5590 /* 37 vars */) = 0\n"
      "101 exit_group(0)                           = ?\n"
      "101 openat(AT_FDCWD</run>, \"/ref/vllm/reused-pid.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "103 execve(\"/usr/bin/cat\", [\"cat\", \"/ref/vllm/x.py\"], 0x55 /* 36 vars */) = 0\n"
      "103 openat(AT_FDCWD</run>, \"/ref/vllm/x.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "104 openat(4</run>, \"metrics.json\", O_RDONLY|O_NOCTTY|O_NONBLOCK|O_NOFOLLOW) = -1 EACCES (Permission denied)\n"
      "102 chdir(\"/run/src\") = 0\n"
      "105 openat(AT_FDCWD</run/src>, \"../transcripts/a.jsonl\", O_RDONLY <unfinished ...>\n"
      "106 <... openat resumed>) = 3</etc/passwd>\n"
      "105 <... openat resumed>) = -1 ENOENT (No such file or directory)\n"
      "107 chdir(\"sub\") = 0\n"
      "107 open(\"x\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "108 symlinkat(\"../transcripts\", AT_FDCWD</run>, \"src/t\") = 0\n"
      "109 openat(AT_FDCWD</run>, \"/proc/self/root/ref/vllm/y.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "110 openat(AT_FDCWD</run>, \"we\\\"ird\\\\na\\x6de\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "111 getcwd(\"/run\", 4096) = 5\n"
      "112 readlinkat(AT_FDCWD</run>, \"l\", \"target\", 4095) = 6\n"
      "113 renameat2(AT_FDCWD</run>, \"a\", 5</run/src>, \"b\", RENAME_NOREPLACE) = 0\n"
      "114 fchdir(3</run/build>) = 0\n"
      "114 execve(\"./t\", [\"./t\"], 0x55 /* 36 vars */) = 0\n"
      "115 inotify_add_watch(3<anon_inode:inotify>, \"/ref/vllm\", IN_MODIFY) = 1\n"
      "116 --- SIGCHLD {si_signo=SIGCHLD} ---\n";
  EXPECT_EQ(shown(parse(log)), (std::vector<std::string>{
                                   "openat /ref/vllm/reused-pid.py",  // a set-up PID that exited, reused by the command
                                   "execve /usr/bin/cat",
                                   "openat /ref/vllm/x.py",
                                   "openat /run/metrics.json walk",
                                   "chdir /run/src",
                                   "openat /run/transcripts/a.jsonl",
                                   "chdir /run/sub",
                                   "open /run/sub/x",
                                   "symlinkat /run/src/t",
                                   "symlink-target /run/transcripts",
                                   "openat /ref/vllm/y.py",
                                   "openat /run/we\"ird\\name",
                                   "readlinkat /run/l stat",
                                   "renameat2 /run/a",
                                   "renameat2 /run/src/b walk",
                                   "execve /run/build/t",
                               }));
  // The unshare fallback's chroot: strace resolves descriptors on the host, below the new root's mount point.
  const std::string chrooted =
      "200 execve(\"/usr/bin/setpriv\", [\"/usr/bin/setpriv\"], 0x1 /* 5 vars */) = 0\n"
      "200 execve(\"/bin/bash\", [\"/bin/bash\", \"-c\", \": mi-audit-0123456789abcdef; cd \"...], 0x1 /* 5 vars */) = 0\n"
      "201 openat(AT_FDCWD</tmp/metainfer-root-x/run>, \"transcripts/a.jsonl\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
  EXPECT_EQ(shown(parse(chrooted, "/tmp/metainfer-root-x")), (std::vector<std::string>{"openat /run/transcripts/a.jsonl"}));
  // Without the tag, nothing is the command's.
  EXPECT_TRUE(parse("300 openat(AT_FDCWD</run>, \"/ref/vllm/x.py\", O_RDONLY) = -1 ENOENT\n").empty());
}

TEST(AgentCommandAudit, OnlyAttemptsCountNotWalksPastHiddenPaths) {
  const std::vector<HiddenPath> hidden = {{"/ref/vllm", true, "reference_path", "ref"},
                                          {"/run/transcripts", true, "workflow_record", "transcripts"},
                                          {"/run/metrics.json", false, "workflow_record", "metrics.json"},
                                          {"/run/src/copied.py", false, "foreign_signature", "copied"}};
  auto reached = [&](const std::vector<FileAccess>& accesses, const std::string& command) {
    std::vector<std::size_t> out;
    for (const ReachedHiddenPath& r : reached_hidden_paths(accesses, hidden, command, "/run")) out.push_back(r.hidden);
    return out;
  };
  using V = std::vector<std::size_t>;
  // Below a hidden directory: always an attempt (its cover is empty; nothing there to be walked into).
  EXPECT_EQ(reached({{"openat", "/ref/vllm/x.py"}}, "cat $d/x.py"), V{0});
  EXPECT_EQ(reached({{"newfstatat", "/run/transcripts/a.jsonl", false, true}}, "test -e $f"), V{1});
  EXPECT_EQ(reached({{"openat", "/run/transcripts/a.jsonl", true}}, "python3 x.py"), V{1});
  // A hidden directory itself: listed or entered, it shows nothing; walkers do it all the time.
  EXPECT_EQ(reached({{"openat", "/run/transcripts"}, {"chdir", "/ref/vllm"}}, "python3 walk.py"), V{});
  // A hidden file: opened by a name the command built counts; stat'ed, walked past, or globbed, it does not.
  EXPECT_EQ(reached({{"openat", "/run/metrics.json"}}, "cat $(echo metrics).json"), V{2});
  EXPECT_EQ(reached({{"execve", "/run/src/copied.py"}}, "f=src/copied.py; $f"), V{3});
  EXPECT_EQ(reached({{"statx", "/run/metrics.json", false, true}}, "ls -l"), V{});
  EXPECT_EQ(reached({{"openat", "/run/metrics.json", true}}, "grep -r x ."), V{});
  EXPECT_EQ(reached({{"openat", "/run/metrics.json"}}, "grep -n x *"), V{});
  EXPECT_EQ(reached({{"openat", "/run/metrics.json"}}, "wc -l m*.json"), V{});
  EXPECT_EQ(reached({{"openat", "/run/src/copied.py"}}, "cat src/*.cpp"), V{3});  // that glob cannot name it
  // A symlink made to lead into a hidden path, at or below it.
  EXPECT_EQ(reached({{"symlink-target", "/run/transcripts"}}, "ln -s $t l"), V{1});
  // Counted once per hidden path, in the order of the hidden paths.
  EXPECT_EQ(reached({{"openat", "/run/transcripts/b"}, {"openat", "/ref/vllm/a"}, {"openat", "/ref/vllm/b"}}, "x"), (V{0, 1}));
}

// A run directory with the workflow's records, a reference checkout beside it and a copied foreign file in src/.
struct AuditedRun {
  mi_test::TempDir dir{"agents-audit"};
  fs::path run = dir / "run", ref = dir / "reference";
  AuditedRun() {
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    write(run / "src/vendored/attention.py", "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nSECRET_COPIED = 1\n");
    write(run / "transcripts/explorer-001.jsonl", "{\"output\":\"SECRET_TRANSCRIPT\"}\n");
    write(run / "metrics.json", "{\"SECRET_METRICS\": 1}\n");
    write(run / "summary.md", "SECRET_SUMMARY\n");
    write(ref / "vllm/x.py", "SECRET_REFERENCE = 1\n");
  }
  SandboxConfig config() const {
    SandboxConfig c;
    c.run_dir = run;
    c.reference_paths = {ref};
    c.command_timeout_s = 60;
    return c;
  }
};

void expect_built_paths_counted(const AuditedRun& w) {
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  // The reviewer's case: the reference tree's path in a variable, invisible to the naming check.
  const std::string parent = fs::canonical(w.dir.path()).string();
  const ToolOutcome ref = sb.call(impl, "run_command", {{"command", "d=" + parent + "; cat $d/reference/vllm/x.py; true"}});
  EXPECT_TRUE(ref.violation) << ref.output;
  EXPECT_EQ(ref.output.find("SECRET"), std::string::npos) << ref.output;
  EXPECT_NE(ref.output.find("refused (reference_path)"), std::string::npos) << ref.output;
  // A file carrying a signature and a record, by paths built at run time.
  const ToolOutcome sig = sb.call(impl, "run_command", {{"command", "f=src/vend$(echo ored); base64 $f/attention.py; true"}});
  EXPECT_TRUE(sig.violation) << sig.output;
  const ToolOutcome rec = sb.call(impl, "run_command", {{"command", "cd src && cat ../metrics.$(echo json) ../trans$(echo cripts)/x; true"}});
  EXPECT_TRUE(rec.violation) << rec.output;
  for (const ToolOutcome* r : {&sig, &rec}) EXPECT_EQ(r->output.find("SECRET"), std::string::npos) << r->output;
  std::map<std::string, int> rules;
  for (const Violation& v : sb.violations()) ++rules[v.rule];
  EXPECT_EQ(rules, (std::map<std::string, int>{{"reference_path", 1}, {"foreign_signature", 1}, {"workflow_record", 2}}))
      << ::testing::PrintToString(rules);
  const std::string ref_path = (fs::canonical(w.ref)).string();
  EXPECT_EQ(sb.violations().at(0).path, ref_path);
  EXPECT_NE(sb.violations().at(0).detail.find(ref_path + "/vllm/x.py"), std::string::npos) << sb.violations().at(0).detail;
  EXPECT_EQ(sb.violations().at(1).path, "src/vendored/attention.py");
}

TEST(AgentCommandAudit, AHiddenPathReachedByAPathBuiltAtRunTimeIsCounted) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths: " << command_isolation().description;
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  AuditedRun w;
  expect_built_paths_counted(w);
}

TEST(AgentCommandAudit, TheUnshareFallbackIsAuditedToo) {
  ForcedEnv forced("METAINFER_AGENT_ISOLATION", "unshare");
  if (command_isolation().kind != IsolationKind::unshare_net || !command_isolation().hides_paths)
    GTEST_SKIP() << "no unshare with a mount namespace here: " << command_isolation().description;
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  AuditedRun w;
  expect_built_paths_counted(w);
}

// What agents run every day reaches past the hidden paths (walks, globs, listings, a build) and is not counted.
TEST(AgentCommandAudit, OrdinaryCommandsAreNotCounted) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  AuditedRun w;
  fs::remove_all(w.run / "src/vendored");  // the naming check refuses globs that could reach a signature file
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  for (const std::string command :
       {"grep -rn 'return' . ; true", "grep -n int * ; true", "ls -la; ls -R . > /dev/null; du -sh . > /dev/null",
        "find . -type f | sort > /dev/null; find . -name '*.cpp' -exec wc -c {} + > /dev/null",
        "python3 -c 'import os; [os.listdir(d) for d, _, _ in os.walk(\".\")]' 2>/dev/null; true",
        "printf 'int main() { return 3; }\\n' > src/m.c && mkdir -p build && cc -O2 src/m.c -o build/m && { ./build/m; echo status=$?; }"}) {
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", command}});
    EXPECT_FALSE(r.violation) << command << "\n" << r.output;
    EXPECT_EQ(r.output.find("SECRET"), std::string::npos) << command << "\n" << r.output;
  }
  EXPECT_TRUE(sb.violations().empty()) << sb.violations().front().detail;
}

// Without strace the command's result says its accesses were not audited; the naming check still counts.
TEST(AgentCommandAudit, WithoutStraceTheResultSaysSoAndNamingStillCounts) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths";
  ForcedEnv off("METAINFER_AGENT_AUDIT", "off");
  ASSERT_FALSE(command_audit_available());
  AuditedRun w;
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome built = sb.call(impl, "run_command", {{"command", "cat trans$(echo cripts)/explorer-001.jsonl; true"}});
  EXPECT_NE(built.output.find("not audited (no strace here)"), std::string::npos) << built.output;
  EXPECT_EQ(built.output.find("SECRET"), std::string::npos) << built.output;
  EXPECT_FALSE(built.violation) << built.output;
  const ToolOutcome named = sb.call(impl, "run_command", {{"command", "cat transcripts/explorer-001.jsonl"}});
  EXPECT_TRUE(named.violation) << named.output;
  ASSERT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.violations()[0].rule, "workflow_record");
  EXPECT_EQ(sb.violations()[0].path, "transcripts");
}

}  // namespace

namespace {

// The audit's cost on a typical build command (CMake configure and a Ninja build of four C++ files with the standard
// library's heavy headers), with and without strace, median of three runs each. A measurement, not a check: run it
// with METAINFER_MEASURE_AUDIT=1 (the figures in the README come from it).
TEST(AgentCommandAudit, OverheadOnABuildCommand) {
  if (!std::getenv("METAINFER_MEASURE_AUDIT")) GTEST_SKIP() << "a measurement: set METAINFER_MEASURE_AUDIT=1";
  if (!command_isolation().hides_paths || !command_audit_available()) GTEST_SKIP() << "needs an isolation that hides paths, and strace";
  mi_test::TempDir dir("agents-audit-cost");
  const fs::path run = dir / "run";
  write(run / "src/CMakeLists.txt", "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\nset(CMAKE_CXX_STANDARD 20)\n"
                                    "add_executable(p a.cpp b.cpp c.cpp d.cpp)\n");
  const std::string body = "#include <algorithm>\n#include <iostream>\n#include <map>\n#include <regex>\n#include <string>\n"
                           "#include <vector>\n#include <thread>\n#include <future>\n";
  for (const char* f : {"a", "b", "c", "d"})
    write(run / "src" / (std::string(f) + ".cpp"),
          body + "int " + f + "_f(const std::vector<std::string>& v) { std::map<std::string, int> m; for (auto& s : v) "
                 "++m[s]; std::regex r(\"x+\"); return int(m.size()) + std::regex_search(v.front(), r); }\n" +
              (std::string(f) == "a" ? "int main() { std::cout << a_f({\"x\"}) << \"\\n\"; }\n" : ""));
  write(run / "transcripts/x.jsonl", "{}\n");
  SandboxConfig c;
  c.run_dir = run;
  c.command_timeout_s = 600;
  ToolSandbox sb(c);
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const std::string build = "rm -rf build && cmake -S src -B build -G Ninja > /dev/null && cmake --build build -j 1 > /dev/null && ./build/p";
  const auto wall = agents_test::audited_and_plain_walls([&] {
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", build}});
    EXPECT_TRUE(r.ok) << r.output;
    EXPECT_FALSE(r.violation) << r.output;
  });
  const double plain = wall.at(false)[1], traced = wall.at(true)[1];
  std::printf("[audit cost] build command: %.2f s without strace, %.2f s with (median of 3; +%.0f%%); runs: ", plain, traced,
              100.0 * (traced / plain - 1));
  for (auto& [audited, v] : wall)
    for (double x : v) std::printf("%s%.2f ", audited ? "audited=" : "plain=", x);
  std::printf("\n");
  // And a command that does next to nothing: what starting strace adds to every command.
  std::map<bool, double> small;
  for (const bool audited : {false, true}) {
    std::optional<ForcedEnv> off;
    if (!audited) off.emplace("METAINFER_AGENT_AUDIT", "off");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(sb.call(impl, "run_command", {{"command", "ls src > /dev/null"}}).ok);
    small[audited] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 10;
  }
  std::printf("[audit cost] `ls src`: %.3f s without strace, %.3f s with (mean of 10)\n", small[false], small[true]);
}

// The same, at the parser: one line of strace 6's output as the command above produces it.
TEST(AgentCommandAudit, TheParserKeepsAPathWhoseWorkingDirectoryHoldsAParenthesis) {
  const std::string log =
      "200 execve(\"/bin/bash\", [\"/bin/bash\", \"-c\", \": mi-audit-0123\"...], 0x7ffd /* 5 vars */) = 0\n"
      "201 openat(AT_FDCWD</run/build/x(>, \"/ref/vllm/model.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
  std::istringstream in(log);
  const std::vector<fs::path> within = {"/ref"};
  const std::vector<FileAccess> a = audited_accesses(in, "mi-audit-0123", "/run", {}, &within);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].path, "/ref/vllm/model.py");
}

}  // namespace
