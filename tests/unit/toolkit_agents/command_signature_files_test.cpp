// Files of the run directory that carry a foreign-framework signature are out of every shell command's sight, not
// merely filtered from its output: a filter is bypassed by re-encoding the file (base64, tr, grep -v). A command
// naming such a file is refused unrun and counted; one that reaches it by a path built at run time cannot read it.
#include <gtest/gtest.h>

#include <set>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/command_audit.h"
#include "agents/isolated_command.h"
#include "agents/signature_files.h"
#include "agents/stage_loop.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::slurp;
using agents_test::write;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";
constexpr const char* kVllmFile = "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nimport torch\nSECRET_VLLM_LINE = 1\n";
constexpr const char* kGgmlFile = "#include \"ggml.h\"\nint SECRET_GGML_LINE;\n";
// base64 of the vLLM file's first line: what `base64 FILE` would print if it could read it.
constexpr const char* kVllmBase64 = "IyBTUERYLUZpbGVDb3B5cmlnaHRUZXh0OiBDb3B5cmlnaHQgY29udHJpYnV0b3Jz";

struct RunWithForeignFiles {
  mi_test::TempDir dir{"agents-sigfiles"};
  fs::path run = dir / "run";
  RunWithForeignFiles() {
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    write(run / "src/vendored/attention.py", kVllmFile);
    write(run / "build/third_party/ggml_copy.cpp", kGgmlFile);  // build trees are scanned too
  }
  SandboxConfig config(SourceSwitch sw) const {
    SandboxConfig c;
    c.run_dir = run;
    c.source_switch = sw;
    c.command_timeout_s = 30;
    return c;
  }
};

TEST(AgentCommandSignatureFiles, ReEncodingAFileCarryingASignatureRevealsNothingAndIsCounted) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "hiding files from commands needs an isolation that hides paths: " << command_isolation().description;
  RunWithForeignFiles w;
  ToolSandbox sb(w.config(SourceSwitch::off));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const std::vector<std::string> attempts = {"base64 src/vendored/attention.py", "grep -v x src/vendored/attention.py",
                                             "tr a-z A-Z < build/third_party/ggml_copy.cpp", "cat src/*/*.py | rev"};
  for (const auto& cmd : attempts) {
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", cmd}});
    EXPECT_TRUE(r.violation) << cmd << "\n" << r.output;
    EXPECT_FALSE(r.ok) << cmd;
    EXPECT_NE(r.output.find("not run"), std::string::npos) << cmd << "\n" << r.output;
    for (const char* leak : {kVllmBase64, "SECRET", "TERCES", "S   E   C"}) EXPECT_EQ(r.output.find(leak), std::string::npos) << cmd << "\n" << r.output;
  }
  ASSERT_EQ(sb.violations().size(), attempts.size());
  for (const auto& v : sb.violations()) EXPECT_EQ(v.rule, "foreign_signature") << v.detail;
  EXPECT_EQ(sb.violations()[0].path, "src/vendored/attention.py");
  EXPECT_NE(sb.violations()[0].detail.find("vLLM"), std::string::npos) << sb.violations()[0].detail;
  EXPECT_EQ(sb.violations()[2].path, "build/third_party/ggml_copy.cpp");
  EXPECT_NE(sb.violations()[2].detail.find("llama.cpp"), std::string::npos) << sb.violations()[2].detail;

  // A path the naming check cannot see (built at run time, or relative to a directory the command changes into):
  // the command runs, and the hidden file gives nothing away, while the rest of the run directory is as it was.
  // Where strace audits commands, each hidden file it reached for counts once (command_audit.h).
  const bool audited = command_audit_available();
  const ToolOutcome built = sb.call(impl, "run_command", {{"command", "f=src/vend$(echo ored)/attention.py; wc -c < $f; base64 $f; "
                                                                      "g=build/third_party/ggml_$(echo copy).cpp; cat $g; "
                                                                      "(cd src && od -c vendored/attention.py); cat src/kernel.cpp"}});
  EXPECT_EQ(built.violation, audited) << built.output;
  EXPECT_EQ(built.ok, !audited) << built.output;
  EXPECT_NE(built.output.find("return 1"), std::string::npos) << built.output;
  for (const char* leak : {kVllmBase64, "SECRET", "ggml.h", "S   E   C"}) EXPECT_EQ(built.output.find(leak), std::string::npos) << built.output;
  // Nothing the command could do to the hidden file reached it.
  const ToolOutcome overwrite = sb.call(impl, "run_command", {{"command", "f=src/vend$(echo ored)/attention.py; echo gone > $f; rm -f $f; true"}});
  EXPECT_EQ(slurp(w.run / "src/vendored/attention.py"), kVllmFile) << overwrite.output;
  EXPECT_EQ(overwrite.violation, audited) << overwrite.output;
  ASSERT_EQ(sb.violations().size(), attempts.size() + (audited ? 3 : 0));
  for (std::size_t i = attempts.size(); i < sb.violations().size(); ++i) EXPECT_EQ(sb.violations()[i].rule, "foreign_signature");
  if (audited) {  // the built command reached both hidden files (counted in the order they are hidden), the overwrite one
    EXPECT_EQ((std::set<std::string>{sb.violations()[attempts.size()].path, sb.violations()[attempts.size() + 1].path}),
              (std::set<std::string>{"src/vendored/attention.py", "build/third_party/ggml_copy.cpp"}));
    EXPECT_EQ(sb.violations()[attempts.size() + 2].path, "src/vendored/attention.py");
  }
}

// With SWITCH=ON only the explorer may read foreign sources, and it has no shell: the implementer's commands are
// held to the same rule.
TEST(AgentCommandSignatureFiles, SwitchOnHidesThemFromTheImplementersShellToo) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "hiding files from commands needs an isolation that hides paths";
  RunWithForeignFiles w;
  ToolSandbox sb(w.config(SourceSwitch::on));
  const ToolOutcome r = sb.call(find_role(kRoles, "implementer"), "run_command", {{"command", "base64 src/vendored/attention.py"}});
  EXPECT_TRUE(r.violation) << r.output;
  EXPECT_EQ(r.output.find(kVllmBase64), std::string::npos) << r.output;
}

// Gate scripts run agent-written code: the signature files are hidden from it as well.
TEST(AgentCommandSignatureFiles, GateScriptsDoNotSeeThemEither) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "hiding files from commands needs an isolation that hides paths";
  RunWithForeignFiles w;
  write(w.run / "gates/leak.sh", "base64 src/vendored/attention.py; cat build/third_party/ggml_copy.cpp\n");
  const GateOutcome g = script_gate(30)(w.run, "leak");
  EXPECT_EQ(g.evidence.find(kVllmBase64), std::string::npos) << g.evidence;
  EXPECT_EQ(g.evidence.find("SECRET"), std::string::npos) << g.evidence;
}

// The scan reads files of any size in chunks: a marker across a chunk boundary is found, and a line-start marker
// is not mistaken for one when the carried tail starts mid-line.
TEST(AgentCommandSignatureFiles, LargeFilesAreScannedInChunks) {
  mi_test::TempDir dir("agents-sigscan");
  const std::size_t chunk = std::size_t(4) << 20;
  std::string across(chunk - 10, 'a');
  across += "\nThe HuggingFace Inc. team\n";
  write(dir / "across.txt", across);
  EXPECT_TRUE(find_foreign_signature_in_file(dir / "across.txt"));
  // The first chunk ends in a line whose last 4096 bytes (the carried tail) are blanks; the next chunk opens with a
  // line-start marker that is in truth in the middle of that line.
  std::string mid(chunk - 4096, 'b');
  mid += std::string(4096, ' ') + "import vllm\n";
  write(dir / "mid.txt", mid);
  EXPECT_FALSE(find_foreign_signature_in_file(dir / "mid.txt"));
  std::string late(3 * chunk, 'c');
  late += "\n  from sglang import x\n";
  write(dir / "late.txt", late);
  const auto sig = find_foreign_signature_in_file(dir / "late.txt");
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->framework, "SGLang");
  EXPECT_EQ(signature_file_paths(dir.path()).size(), 2u);
}

}  // namespace
