// Gates run agent-written code under the strace audit agents' commands get (gate_watch.h judge_gate_accesses): a
// gate script's callee, or a static initializer linked into the stage tests the engine stage gate's verifier runs,
// that reaches for a hidden reference tree by a path it builds at run time finds nothing (the mounts), and the attempt
// is a counted violation that fails the gate. The verifier itself runs with no shell around it and is audited from
// its own execve on; its legitimate reads (the engine directory, the toolkit's files, the system) do not count, so an
// honest stage still passes with no violation. Without strace the gate's evidence says it was not audited.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "../toolkit_support.h"
#include "agents/command_audit.h"
#include "agents/engine_gate.h"
#include "agents/gate_watch.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::ForcedEnv;
using agents_test::write;

std::string rules(const std::vector<Violation>& violations) {
  std::string s;
  for (const Violation& v : violations) s += v.rule + " " + v.path + ": " + v.detail + "\n";
  return s;
}

bool counted(const std::vector<Violation>& violations, const std::string& rule, const std::string& path) {
  return std::any_of(violations.begin(), violations.end(), [&](const Violation& v) {
    return v.role == "gate" && v.tool == "gate" && v.rule == rule && v.path == path;
  });
}

// A reference tree beside the run directory, and a gate script whose callee (agent-written src/check.sh) builds the
// tree's path at run time, out of the naming check's sight, and reads a file of it.
struct ScriptGateRun {
  mi_test::TempDir dir{"agents-gate-audit-script"};
  fs::path ref = fs::canonical(dir.path()) / "ref", run = dir / "run";
  ScriptGateRun() {
    write(ref / "vllm/model.py", "weights = 'reference text'\n");
    write(run / "gates/s1.sh", "bash src/check.sh; exit 0\n");
  }
  void protect() { write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs())); }
};

// The reviewer's reproduction (review 5 of issue 12): the callee's read finds nothing, and now counts and fails the gate.
TEST(AgentGateAudit, AScriptGatesCalleeReachingForAHiddenReferenceFailsTheGateAndCounts) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  ScriptGateRun w;
  write(w.run / "src/check.sh", "d=$(echo " + (w.dir.path() / "r").string() + "ef); cat \"$d/vllm/model.py\" || true\n");
  w.protect();
  const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;  // hidden: holds
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_TRUE(counted(g.violations, "reference_path", w.ref.string())) << rules(g.violations) << g.evidence;
  EXPECT_NE(g.evidence.find("refused (reference_path)"), std::string::npos) << g.evidence;
  EXPECT_NE(g.evidence.find("vllm/model.py"), std::string::npos) << g.evidence;
}

// A record and a signature file reached by the callee by built paths count under their own rules; the same gate whose
// callee only walks past them (grep -r, a listing) and builds passes with no violation.
TEST(AgentGateAudit, AScriptGateCountsRecordsAndSignatureFilesButNotWalksPastThem) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  ScriptGateRun w;
  write(w.run / "transcripts/explorer-001.jsonl", "{\"SECRET\": 1}\n");
  write(w.run / "src/vendored/attention.py", "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nSECRET\n");
  write(w.run / "src/check.sh", "grep -rn 'SECRE[T]' . ; ls -R . > /dev/null; printf 'int main() { return 0; }\\n' > /tmp/m.c && "
                                "cc /tmp/m.c -o /tmp/m && /tmp/m\n");
  w.protect();
  const GateOutcome honest = script_gate(60, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_TRUE(honest.passed) << honest.evidence;
  EXPECT_TRUE(honest.violations.empty()) << rules(honest.violations);
  EXPECT_EQ(honest.evidence.find("SECRET"), std::string::npos) << honest.evidence;

  write(w.run / "src/check.sh", "t=trans$(echo cripts); cat $t/explorer-001.jsonl; f=src/vend$(echo ored); base64 $f/attention.py; true\n");
  w.protect();
  const GateOutcome cheat = script_gate(60, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_FALSE(cheat.passed) << cheat.evidence;
  EXPECT_TRUE(counted(cheat.violations, "workflow_record", "transcripts")) << rules(cheat.violations);
  EXPECT_TRUE(counted(cheat.violations, "foreign_signature", "src/vendored/attention.py")) << rules(cheat.violations);
  EXPECT_EQ(cheat.evidence.find("SECRET"), std::string::npos) << cheat.evidence;
}

// Without strace a gate runs as agents' commands do: hidden paths stay hidden, its evidence says the run was not
// audited, and the gate's verdict is the script's.
TEST(AgentGateAudit, WithoutStraceTheGateSaysItWasNotAudited) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  ForcedEnv off("METAINFER_AGENT_AUDIT", "off");
  ASSERT_FALSE(command_audit_available());
  ScriptGateRun w;
  write(w.run / "src/check.sh", "d=$(echo " + (w.dir.path() / "r").string() + "ef); cat \"$d/vllm/model.py\" || true\n");
  w.protect();
  const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;
  EXPECT_NE(g.evidence.find("file accesses not audited (no strace here)"), std::string::npos) << g.evidence;
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_TRUE(g.violations.empty()) << rules(g.violations);
}

// The verifier runs with no shell of ours around it: the audit keys on its own execve (program_audit_tag). In a log
// of strace's shape: bubblewrap's set-up (its execve names the verifier among its arguments, cut by strace, and it
// mounts over the hidden paths) is not the run's; the verifier's own accesses are marked, a process it started is not.
TEST(AgentGateAudit, TheVerifiersOwnExecveKeysTheAudit) {
  const std::string tag = program_audit_tag("/opt/mi/metainfer");
  EXPECT_EQ(tag, "(\"/opt/mi/metainfer\", [");
  EXPECT_EQ(program_audit_tag("/opt/mi\"x/metainfer"), "");  // strace would escape it: no tag, no audit
  EXPECT_EQ(program_audit_tag("relative/metainfer"), "");
  mi_test::TempDir dir("agents-gate-audit-log");
  const std::string run = fs::canonical(dir.path()).string() + "/run";
  write(fs::path(run) / "metrics.json", "{}\n");  // a hidden file is judged as one when it is there
  const std::string log =
      "100 execve(\"/usr/bin/bwrap\", [\"bwrap\", \"--die-with-parent\", \"--unshare-all\"...], 0x7ffd /* 5 vars */) = 0\n"
      "101 mount(\"tmpfs\", \"/newroot/ref\", \"tmpfs\", MS_NOSUID|MS_NODEV, \"mode=0755\") = 0\n"
      "101 openat(AT_FDCWD</>, \"/newroot" + run + "/metrics.json\", O_RDONLY|O_CLOEXEC|O_PATH) = 4</newroot" + run + "/metrics.json>\n"
      "101 execve(\"/opt/mi/metainfer\", [\"/opt/mi/metainfer\", \"verify\", \".\"], 0x5609 /* 9 vars */) = 0\n"
      "101 openat(AT_FDCWD<" + run + ">, \"" + run + "/metrics.json\", O_RDONLY) = -1 EACCES (Permission denied)\n"
      "102 execve(\"" + run + "/build/stage_basic_execution\", [\"" + run + "/build/stage_basic_execution\"], 0x55ae /* 11 vars */) = 0\n"
      "102 openat(AT_FDCWD<" + run + ">, \"/ref/vllm/model.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
      "102 exit_group(0)                     = ?\n"
      "101 exit_group(0)                     = ?\n";
  std::istringstream in(log);
  const std::vector<fs::path> within = {"/ref", run + "/metrics.json"};
  const std::vector<FileAccess> a = audited_accesses(in, tag, run, {}, &within);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].path, run + "/metrics.json");
  EXPECT_TRUE(a[0].by_tagged);
  EXPECT_EQ(a[1].path, "/ref/vllm/model.py");
  EXPECT_FALSE(a[1].by_tagged);
  // Judged: the verifier's own open of the covered record is its scan's (a walk); the stage test's reach counts.
  CommandResult r;
  r.audited = true;
  r.accesses = a;
  r.hidden = {"/ref", run + "/metrics.json"};
  const std::vector<Violation> v = judge_gate_accesses(run, "verify", r, {"/ref"}, "", /*trusted_program=*/true);
  ASSERT_EQ(v.size(), 1u) << rules(v);
  EXPECT_EQ(v[0].rule, "reference_path");
  EXPECT_EQ(v[0].path, "/ref");
  // The same accesses from a script gate's shell (no trusted program): both count, the record as workflow_record.
  const std::vector<Violation> all = judge_gate_accesses(run, "gates/s1.sh", r, {"/ref"}, "bash gates/s1.sh");
  EXPECT_TRUE(counted(all, "workflow_record", "metrics.json")) << rules(all);
  EXPECT_TRUE(counted(all, "reference_path", "/ref")) << rules(all);
}

// A small engine directory for the real verifier (agents_test::write_small_engine, its checkpoint an empty directory);
// the run directory holds the workflow's records, as a real run's does, so they are among the hidden paths.
void write_small_engine(const fs::path& dir, const fs::path& run, const std::string& answer_cpp) {
  fs::create_directories(dir / "model");
  agents_test::write_small_engine(run, dir / "model", answer_cpp);
  write(run / "transcripts/explorer-001.jsonl", "{\"SECRET\": 1}\n");
  write(run / "metrics.json", "{}\n");
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
}

struct EngineGateRun {
  mi_test::TempDir dir{"agents-gate-audit-engine"};
  fs::path ref = fs::canonical(dir.path()) / "ref", run = dir / "engine";
  EngineGateRun() { write(ref / "vllm/model.py", "weights = 'reference text'\n"); }
  GateOutcome gate() { return engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 600, 16 * 1024, {ref}})(run, "basic_execution"); }
};

// The stage test's static initializer (agent-written src/answer.cpp) opens a file of the hidden reference tree by a
// path it builds at run time. It finds nothing and the stage test passes, so the verifier says PASSED; the gate
// FAILS, the attempt counted as a reference_path violation.
TEST(AgentGateAudit, AStageTestsStaticInitializerReachingForAHiddenReferenceFailsTheEngineStageGate) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the engine gate needs bubblewrap";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  EngineGateRun w;
  write_small_engine(w.dir.path(), w.run,
                     "#include <cstdio>\n#include <fstream>\n#include <string>\n"
                     "namespace {\nstruct Peek {\n  Peek() {\n"
                     "    std::string d = \"" + (w.dir.path() / "r").string() + "\";\n    d += \"ef\";\n"
                     "    std::ifstream in(d + \"/vllm/model.py\");\n    std::string line;\n"
                     "    if (std::getline(in, line)) std::printf(\"PEEKED %s\\n\", line.c_str());\n    std::fflush(stdout);\n"
                     "  }\n} peek;\n}  // namespace\n"
                     "int answer() { return 42; }\n");
  const GateOutcome g = w.gate();
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_NE(g.evidence.find("PASSED L1_stage:basic_execution"), std::string::npos) << g.evidence;  // the verifier passed it
  EXPECT_TRUE(counted(g.violations, "reference_path", w.ref.string())) << rules(g.violations) << g.evidence;
  EXPECT_NE(g.evidence.find("refused (reference_path)"), std::string::npos) << g.evidence;
  EXPECT_EQ(g.evidence.find("PEEKED"), std::string::npos) << g.evidence;
  EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;
}

// The control: the same engine, honest, passes with no violation: the verifier's own reads (the engine directory,
// the toolkit's ckb/ and contracts, the system, ccache), the build's and the stage test's are not counted.
TEST(AgentGateAudit, AnHonestStagePassesTheAuditedEngineStageGateWithNoViolation) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the engine gate needs bubblewrap";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  EngineGateRun w;
  write_small_engine(w.dir.path(), w.run, "int answer() { return 42; }\n");
  const GateOutcome g = w.gate();
  EXPECT_TRUE(g.passed) << g.evidence;
  EXPECT_TRUE(g.violations.empty()) << rules(g.violations);
  EXPECT_EQ(g.evidence.find("not audited"), std::string::npos) << g.evidence;
}

// The audit's cost on the honest engine stage gate (configure, build, stage test), with and without strace, median of
// three runs each. A measurement, not a check: run it with METAINFER_MEASURE_AUDIT=1.
TEST(AgentGateAudit, OverheadOnAnEngineStageGate) {
  if (!std::getenv("METAINFER_MEASURE_AUDIT")) GTEST_SKIP() << "a measurement: set METAINFER_MEASURE_AUDIT=1";
  if (command_isolation().kind != IsolationKind::bubblewrap || !command_audit_available()) GTEST_SKIP() << "needs bubblewrap and strace";
  EngineGateRun w;
  write_small_engine(w.dir.path(), w.run, "int answer() { return 42; }\n");
  const auto wall = agents_test::audited_and_plain_walls([&] {
    const GateOutcome g = w.gate();
    EXPECT_TRUE(g.passed) << g.evidence;
    EXPECT_TRUE(g.violations.empty()) << rules(g.violations);
  });
  std::printf("[gate audit cost] engine stage gate: %.2f s without strace, %.2f s with (median of 3; %+.0f%%); runs: ", wall.at(false)[1],
              wall.at(true)[1], 100.0 * (wall.at(true)[1] / wall.at(false)[1] - 1));
  for (auto& [audited, v] : wall)
    for (double x : v) std::printf("%s%.2f ", audited ? "audited=" : "plain=", x);
  std::printf("\n");
}

// Found by review: a path through a directory descriptor's magic link (/proc/self/fd/N/..., /dev/fd/N/...)
// reaches into the hidden reference tree and finds nothing (the mount holds); the log does not say where the
// descriptor leads, so such a path counts as a reach for a hidden path (kUnresolvedDescriptor) and fails the gate. (The
// same holds for agents' commands.)
TEST(AgentGateAudit, AGatesCalleeReachingThroughADescriptorPathIsCounted) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  for (const std::string& via : std::vector<std::string>{"/proc/self/fd/3", "/dev/fd/3"}) {
    ScriptGateRun w;
    // fd 3 is the reference tree's parent (not hidden); the reference is then named below the magic link.
    write(w.run / "src/check.sh", "exec 3<" + w.ref.parent_path().string() + "; cat " + via + "/r$(echo ef)/vllm/model.py || true\n");
    w.protect();
    const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
    EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;  // hidden: holds
    EXPECT_NE(g.evidence.find(via + "/ref/vllm/model.py"), std::string::npos) << g.evidence;  // it did try
    EXPECT_FALSE(g.passed) << via << ": " << g.evidence;
    EXPECT_TRUE(counted(g.violations, "reference_path", kUnresolvedDescriptor)) << via << ": " << rules(g.violations) << g.evidence;
  }
}

// Found by review: strace -y prints the working directory in
// AT_FDCWD</dir> without escaping '(' or ')'. split_args counts '(' as a nesting level, so in a directory whose name
// holds '(' the rest of the call is one argument and the path is lost: every access of a process working there is
// unseen. The callee makes such a directory in its build tree (writable to gates) and reaches for the reference.
TEST(AgentGateAudit, AGatesCalleeWorkingInADirectoryNamedWithAParenthesisIsStillAudited) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  ScriptGateRun w;
  write(w.run / "src/check.sh", "mkdir -p 'build/x(' && cd 'build/x(' && cat " + w.ref.parent_path().string() + "/r$(echo ef)/vllm/model.py || true\n");
  w.protect();
  const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;  // hidden: holds
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_TRUE(counted(g.violations, "reference_path", w.ref.string())) << rules(g.violations) << g.evidence;
}

// Found by review: the audit compares paths lexically, so a hidden tree under /usr/lib reached through the
// merged-/usr link /lib (Debian, Ubuntu, Fedora; bubblewrap's sandbox has /lib -> usr/lib too) is not counted. This is
// where apt puts Python packages (/usr/lib/python3/dist-packages/<pkg>: the system scan's trees, or a --reference).
// /usr/lib/apt stands in for such a tree here (hidden from this gate as a reference).
TEST(AgentGateAudit, AGatesCalleeReachingThroughTheMergedUsrLinkIsCounted) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  std::error_code ec;
  if (!fs::is_symlink("/lib", ec) || fs::canonical("/lib", ec) != "/usr/lib" || !fs::is_directory("/usr/lib/apt/methods", ec))
    GTEST_SKIP() << "needs a merged-/usr host with /usr/lib/apt/methods";
  const fs::path tree = "/usr/lib/apt";
  for (const std::string& via : std::vector<std::string>{"/usr/lib", "/lib"}) {
    ScriptGateRun w;
    write(w.run / "src/check.sh", "d=" + via + "/a$(echo pt); cat $d/methods/http > /dev/null || true\n");
    w.protect();
    const GateOutcome g = script_gate(30, 16 * 1024, {tree})(w.run, "s1");
    EXPECT_FALSE(g.passed) << via << ": " << g.evidence;
    EXPECT_TRUE(counted(g.violations, "reference_path", tree.string())) << via << ": " << rules(g.violations) << g.evidence;
  }
}

}  // namespace
