// Review 6 of issue 12: planted cheats against the fixes of review 5's gaps. Each test says what should hold and
// FAILS while the gap it names is open.
//   ./build/test_toolkit_agents --gtest_filter='Review6.*'
// Review6.ASymlinkedScriptInUsrLocalBinDoesNotStopEveryCommand plants a symlink in /usr/local/bin (opt-in:
// METAINFER_TEST_PLANT_HOST=1, as root; the host's trees are found once per process, so run it alone:
//   METAINFER_TEST_PLANT_HOST=1 ./build/test_toolkit_agents --gtest_filter=Review6.ASymlinkedScriptInUsrLocalBinDoesNotStopEveryCommand).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../toolkit_support.h"
#include "agents/command_audit.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "agents/system_references.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::write;

std::string rules(const std::vector<Violation>& violations) {
  std::string s;
  for (const Violation& v : violations) s += v.rule + " " + v.path + ": " + v.detail + "\n";
  return s;
}

bool counted(const std::vector<Violation>& violations, const std::string& rule, const std::string& path) {
  return std::any_of(violations.begin(), violations.end(), [&](const Violation& v) { return v.rule == rule && v.path == path; });
}

struct ScriptGateRun {
  mi_test::TempDir dir{"review6-gate"};
  fs::path base = fs::canonical(dir.path()), ref = base / "ref", run = base / "run";
  ScriptGateRun() {
    write(ref / "vllm/model.py", "weights = 'reference text'\n");
    write(run / "gates/s1.sh", "bash src/check.sh; exit 0\n");
  }
  void protect() { write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs())); }
};

// Gap A (gate audit, fix 3): a path through a directory descriptor's magic link (/proc/self/fd/N/..., /dev/fd/N/...)
// reaches into the hidden reference tree, finds nothing (the mount holds), and is not counted: audited_accesses'
// unproc() rewrites /proc/<self>/root and /proc/<self>/cwd only, so the access stays "/proc/self/fd/3/ref/..." and is
// dropped by the only_within filter. The gate passes with no violation. (The same holds for agents' commands.)
TEST(Review6, AGatesCalleeReachingThroughAnFdMagicLinkIsCounted) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  for (const std::string& via : std::vector<std::string>{"/proc/self/fd/3", "/dev/fd/3"}) {
    ScriptGateRun w;
    // fd 3 is the reference tree's parent (not hidden); the reference is then named below the magic link.
    write(w.run / "src/check.sh", "exec 3<" + w.base.string() + "; cat " + via + "/r$(echo ef)/vllm/model.py || true\n");
    w.protect();
    const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
    EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;  // hidden: holds
    EXPECT_NE(g.evidence.find(via + "/ref/vllm/model.py"), std::string::npos) << g.evidence;  // it did try
    EXPECT_FALSE(g.passed) << via << ": " << g.evidence;
    EXPECT_TRUE(counted(g.violations, "reference_path", w.ref.string())) << via << ": " << rules(g.violations) << g.evidence;
  }
}

// Gap F (the audit's log parser, fix 3 and agents' commands alike): strace -y prints the working directory in
// AT_FDCWD</dir> without escaping '(' or ')'. split_args counts '(' as a nesting level, so in a directory whose name
// holds '(' the rest of the call is one argument and the path is lost: every access of a process working there is
// unseen. The callee makes such a directory in its build tree (writable to gates) and reaches for the reference.
TEST(Review6, AGatesCalleeWorkingInADirectoryNamedWithAParenthesisIsStillAudited) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  if (!command_audit_available()) GTEST_SKIP() << "no strace here";
  ScriptGateRun w;
  write(w.run / "src/check.sh", "mkdir -p 'build/x(' && cd 'build/x(' && cat " + w.base.string() + "/r$(echo ef)/vllm/model.py || true\n");
  w.protect();
  const GateOutcome g = script_gate(30, 16 * 1024, {w.ref})(w.run, "s1");
  EXPECT_EQ(g.evidence.find("reference text"), std::string::npos) << g.evidence;  // hidden: holds
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_TRUE(counted(g.violations, "reference_path", w.ref.string())) << rules(g.violations) << g.evidence;
}

// The same, at the parser: one line of strace 6's output as the command above produces it.
TEST(Review6, TheAuditParserKeepsAPathWhoseWorkingDirectoryHoldsAParenthesis) {
  const std::string log =
      "200 execve(\"/bin/bash\", [\"/bin/bash\", \"-c\", \": mi-audit-0123\"...], 0x7ffd /* 5 vars */) = 0\n"
      "201 openat(AT_FDCWD</run/build/x(>, \"/ref/vllm/model.py\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
  std::istringstream in(log);
  const std::vector<fs::path> within = {"/ref"};
  const std::vector<FileAccess> a = audited_accesses(in, "mi-audit-0123", "/run", {}, &within);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].path, "/ref/vllm/model.py");
}

// Gap B (gate audit, fix 3): the audit compares paths lexically, so a hidden tree under /usr/lib reached through the
// merged-/usr link /lib (Debian, Ubuntu, Fedora; bubblewrap's sandbox has /lib -> usr/lib too) is not counted. This is
// where apt puts Python packages (/usr/lib/python3/dist-packages/<pkg>: the system scan's trees, or a --reference).
// /usr/lib/apt stands in for such a tree here (hidden from this gate as a reference).
TEST(Review6, AGatesCalleeReachingThroughTheMergedUsrLinkIsCounted) {
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

// Gap C (system scan, fix 1): a zipped egg (setuptools' default for a zip-safe pure-Python package installed by
// `setup.py install` / easy_install: one file, <name>-<version>-pyX.Y.egg) holds the package's whole source; the scan
// descends only into egg *directories*, so the file is not hidden and `unzip -p` / Python's zipfile reads it.
TEST(AgentSystemReferencesReview6, AZippedEggIsFound) {
  mi_test::TempDir root("review6-egg");
  const fs::path dist = root / "usr/local/lib/python3.11/dist-packages";
  const fs::path src = root / "src";
  write(src / "gguf/__init__.py", "from .constants import *\n");
  write(src / "gguf/constants.py", "class MODEL_ARCH:\n    LLAMA = 1\n");
  fs::create_directories(dist);
  const fs::path egg = dist / "gguf-0.10.0-py3.11.egg";
  const std::string zip = "cd '" + src.string() + "' && python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); "
                          "[z.write(f) for f in ('gguf/__init__.py','gguf/constants.py')]; z.close()\" '" + egg.string() + "'";
  if (std::system(zip.c_str()) != 0 || !fs::is_regular_file(egg)) GTEST_SKIP() << "no python3 to make the zip";
  const std::vector<fs::path> found = system_reference_trees(root.path());
  EXPECT_NE(std::find(found.begin(), found.end(), egg), found.end()) << ::testing::PrintToString(found);
}

// Gap G (system scan, fix 1): on Fedora/RHEL/Rocky, `pip install` as root puts a platform wheel (vLLM, llama-cpp-python:
// compiled extensions, Root-Is-Purelib false) in platlib, /usr/local/lib64/python3.X/site-packages. python_package_dirs
// scans usr/lib, usr/local/lib and usr/lib64, not usr/local/lib64, and every command mounts /usr whole.
TEST(AgentSystemReferencesReview6, PlatformPackagesInUsrLocalLib64AreFound) {
  mi_test::TempDir root("review6-lib64");
  const fs::path pkg = root / "usr/local/lib64/python3.12/site-packages/vllm";
  write(pkg / "__init__.py", "from vllm.engine.llm_engine import LLMEngine\n");
  write(pkg / "model_executor/models/llama.py", "class LlamaAttention:\n    pass\n");
  const std::vector<fs::path> found = system_reference_trees(root.path());
  EXPECT_NE(std::find(found.begin(), found.end(), pkg), found.end()) << ::testing::PrintToString(found);
}

// Gap D (checkpoint allow-list, fix 2; a nit: the index is the checkpoint's, not agent-written): the shard names the
// index lists are allowed by plain file name, whatever they are, so an index that names the golden answers mounts them.
TEST(AgentGateCheckpointFilesReview6, AShardIndexCannotNameTheGoldenAnswers) {
  mi_test::TempDir dir("review6-shards");
  const fs::path model = dir / "m";
  write(model / "config.json", "{}\n");
  write(model / "model-00001-of-00001.safetensors", "x");
  write(model / "trace.json", "{\"greedy_ids\": [1, 2, 3]}\n");
  write(model / "logits.safetensors", "x");
  write(model / "model.safetensors.index.json",
        json{{"weight_map", {{"a", "model-00001-of-00001.safetensors"}, {"b", "trace.json"}, {"c", "logits.safetensors"}}}}.dump());
  std::vector<std::string> names;
  for (const fs::path& f : checkpoint_data_files(model)) names.push_back(f.filename().string());
  EXPECT_EQ(std::count(names.begin(), names.end(), "trace.json"), 0) << ::testing::PrintToString(names);
  EXPECT_EQ(std::count(names.begin(), names.end(), "logits.safetensors"), 0) << ::testing::PrintToString(names);
}

// Gap E (system scan, fix 1; honest use): a script in /usr/local/bin that is a symlink (`ln -s ~/llama.cpp/
// convert_hf_to_gguf.py /usr/local/bin/`, a usual way to put it on PATH) is found, since is_regular_file follows the
// link, and append_bwrap_hides binds /dev/null over the *link's* path: bubblewrap cannot create a mount point there
// ("bwrap: Can't create file at /usr/local/bin/...: No such file or directory") and every command, script gate, stage
// gate and acceptance sandbox on that host fails before it runs.
TEST(Review6, ASymlinkedScriptInUsrLocalBinDoesNotStopEveryCommand) {
  if (!std::getenv("METAINFER_TEST_PLANT_HOST")) GTEST_SKIP() << "plants a symlink in /usr/local/bin; set METAINFER_TEST_PLANT_HOST=1";
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "bubblewrap's behaviour";
  mi_test::TempDir dir("review6-symlink-host");
  const fs::path target = fs::canonical(dir.path()) / "llama.cpp/convert_hf_to_gguf.py";
  write(target, "#!/usr/bin/env python3\nimport gguf\nREFERENCE_BODY_LINE = 'rope_theta handling'\n");
  const fs::path link = "/usr/local/bin/mi_review6_convert_hf_to_gguf.py";
  struct Remove {
    fs::path p;
    ~Remove() { std::error_code ec; fs::remove(p, ec); }
  } remove{link};
  fs::create_symlink(target, link);
  const auto& trees = host_system_reference_trees();  // first use in this process: sees the link
  EXPECT_NE(std::find(trees.begin(), trees.end(), link), trees.end());
  mi_test::TempDir run("review6-symlink-run");
  const CommandResult r = run_isolated_command("echo ran", run.path(), {}, 30, 4096);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ran"), std::string::npos) << r.output;
}

}  // namespace
