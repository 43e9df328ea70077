// The tool sandbox: role grants, path confinement, the source switch (paths and signatures), protected files and
// their hash manifest, and shell commands without network.
#include <gtest/gtest.h>

#include <fstream>

#include "agents_test_support.h"
#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/isolated_command.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "agents/source_switch.h"
#include "agents/tool_sandbox.h"
#include "common/error.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;

const fs::path kRoles = fs::path(METAINFER_SOURCE_DIR) / "ckb" / "roles";

using agents_test::slurp;
using agents_test::write;

// A run directory, a CKB, and a reference checkout beside them (not inside the run directory).
struct World {
  mi_test::TempDir dir{"agents-sandbox"};
  fs::path run = dir / "run", ckb = dir / "ckb", ref = dir / "reference";
  World() {
    write(run / "src/kernel.cpp", "int f() { return 1; }\n");
    write(run / "tests/stage_test.cpp", "TEST(Stage, Works) { EXPECT_EQ(f(), 1); }\n");
    write(run / "gates/run.sh", "#!/bin/sh\n");
    write(ckb / "contracts/matmul.toml", "id = \"matmul\"\nsummary = \"row-major GEMV with f32 accumulation\"\n");
    write(ref / "vllm/attention.py", "def attention(q, k, v):\n    return q\n");
  }
  SandboxConfig config(SourceSwitch sw = SourceSwitch::off) const {
    SandboxConfig c;
    c.run_dir = run;
    c.ckb_dir = ckb;
    c.reference_paths = {ref};
    c.source_switch = sw;
    c.command_timeout_s = 30;
    return c;
  }
};

TEST(AgentSandbox, ImplementerReadingABlockedReferencePathIsRefusedAndCounted) {
  World w;
  ToolSandbox sb(w.config(SourceSwitch::off));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome r = sb.call(impl, "read_file", {{"path", (w.ref / "vllm/attention.py").string()}});
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.violation);
  EXPECT_EQ(r.output.find("return q"), std::string::npos);
  ASSERT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.violations()[0].rule, "reference_path");
  EXPECT_EQ(sb.violations()[0].role, "implementer");
  // Listing the tree is reading it too; and a symlink planted in the run directory leads nowhere.
  EXPECT_TRUE(sb.call(impl, "list_dir", {{"path", w.ref.string()}}).violation);
  fs::create_directory_symlink(w.ref, w.run / "src/ref_link");
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/ref_link/vllm/attention.py"}}).violation);
  EXPECT_EQ(sb.violations().size(), 3u);
  EXPECT_TRUE(sb.reference_accesses().empty());
}

TEST(AgentSandbox, SwitchOnLetsOnlyTheExplorerReadReferencesAndLogsEachRead) {
  World w;
  ToolSandbox sb(w.config(SourceSwitch::on));
  const ToolOutcome e = sb.call(find_role(kRoles, "explorer"), "read_file", {{"path", (w.ref / "vllm/attention.py").string()}});
  EXPECT_TRUE(e.ok) << e.output;
  EXPECT_NE(e.output.find("return q"), std::string::npos);
  ASSERT_EQ(sb.reference_accesses().size(), 1u);
  EXPECT_EQ(sb.reference_accesses()[0].role, "explorer");
  const ToolOutcome i = sb.call(find_role(kRoles, "implementer"), "read_file", {{"path", (w.ref / "vllm/attention.py").string()}});
  EXPECT_TRUE(i.violation);
  EXPECT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.reference_accesses().size(), 1u);
}

TEST(AgentSandbox, SwitchOffRefusesFilesCarryingForeignSignaturesAnywhere) {
  World w;
  // A file copied into the run directory, outside every configured reference path.
  write(w.run / "src/copied.py", "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nimport torch\n");
  write(w.run / "src/model.py", "import torch\n    from transformers.models.llama import LlamaConfig\n");
  write(w.run / "src/ours.md", "We compare against vllm and llama.cpp; transformers is the oracle.\n");
  ToolSandbox sb(w.config(SourceSwitch::off));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome a = sb.call(impl, "read_file", {{"path", "src/copied.py"}});
  EXPECT_TRUE(a.violation);
  EXPECT_NE(a.output.find("vLLM"), std::string::npos);
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/model.py"}}).violation);
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/ours.md"}}).ok);  // naming a framework is not its source
  // Writing such text is refused as well, as is an edit that would introduce it.
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "src/x.cpp"}, {"content", "#include \"ggml.h\"\nint x;\n"}}).violation);
  EXPECT_TRUE(sb.call(impl, "edit_file", {{"path", "src/kernel.cpp"}, {"old", "int f()"}, {"new", "#include \"llama.h\"\nint f()"}}).violation);
  EXPECT_EQ(sb.violations().size(), 4u);
  for (const auto& v : sb.violations()) EXPECT_EQ(v.rule, "foreign_signature");
  EXPECT_FALSE(fs::exists(w.run / "src/x.cpp"));
}

TEST(AgentSandbox, ImplementerWritingAProtectedTestContractIsRefusedAndTamperingIsCaught) {
  World w;
  write_protected_manifest(protected_manifest_path(w.run), snapshot_protected(w.run, default_protected_globs()));
  EXPECT_NO_THROW(require_untampered(w.run));
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const std::string before = slurp(w.run / "tests/stage_test.cpp");
  const ToolOutcome r = sb.call(impl, "edit_file", {{"path", "tests/stage_test.cpp"}, {"old", "EXPECT_EQ(f(), 1);"}, {"new", ""}});
  EXPECT_TRUE(r.violation);
  EXPECT_EQ(sb.violations().at(0).rule, "protected_path");
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "gates/run.sh"}, {"content", "exit 0\n"}}).violation);
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", ".metainfer/protected.json"}, {"content", "{}"}}).violation);
  EXPECT_EQ(slurp(w.run / "tests/stage_test.cpp"), before);
  EXPECT_NO_THROW(require_untampered(w.run));

  // A change that bypassed the sandbox (a build step, a bug) is caught by the hash check before the gate.
  write(w.run / "tests/stage_test.cpp", "TEST(Stage, Works) {}\n");
  write(w.run / "tests/extra_test.cpp", "\n");
  fs::remove(w.run / "gates/run.sh");
  const TamperReport t = check_protected(w.run, read_protected_manifest(protected_manifest_path(w.run)), default_protected_globs());
  EXPECT_EQ(t.modified, std::vector<std::string>{"tests/stage_test.cpp"});
  EXPECT_EQ(t.added, std::vector<std::string>{"tests/extra_test.cpp"});
  EXPECT_EQ(t.missing, std::vector<std::string>{"gates/run.sh"});
  try {
    require_untampered(w.run);
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified tests/stage_test.cpp"), std::string::npos) << e.what();
  }
}

TEST(AgentSandbox, PathEscapesAreRefused) {
  World w;
  write(w.dir / "secret.txt", "outside\n");
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "../secret.txt"}}).violation);
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/../../secret.txt"}}).violation);
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "/etc/passwd"}}).violation);
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "../escaped.txt"}, {"content", "x"}}).violation);
  fs::create_symlink(w.dir / "secret.txt", w.run / "src/link.txt");
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/link.txt"}}).violation);
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "src/link.txt"}, {"content", "overwritten"}}).violation);
  EXPECT_EQ(slurp(w.dir / "secret.txt"), "outside\n");
  EXPECT_FALSE(fs::exists(w.dir / "escaped.txt"));
  EXPECT_EQ(sb.violations().size(), 6u);
  for (const auto& v : sb.violations()) EXPECT_EQ(v.rule, "path_escape");
  // Without a CKB, "@ckb/..." names nothing (it must not resolve against the process's working directory).
  SandboxConfig no_ckb = w.config();
  no_ckb.ckb_dir.clear();
  ToolSandbox bare(no_ckb);
  EXPECT_TRUE(bare.call(impl, "read_file", {{"path", "@ckb/../run/src/kernel.cpp"}}).violation);
}

TEST(AgentSandbox, GrantsFollowTheRoleFile) {
  World w;
  ToolSandbox sb(w.config());
  const AgentRoleSpec reviewer = find_role(kRoles, "spec_reviewer");
  // The reviewer has no edit tool and may write only review/.
  EXPECT_EQ(sb.call(reviewer, "edit_file", {{"path", "src/kernel.cpp"}, {"old", "1"}, {"new", "2"}}).output.find("tool_not_granted") != std::string::npos, true);
  EXPECT_TRUE(sb.call(reviewer, "write_file", {{"path", "src/kernel.cpp"}, {"content", "x"}}).violation);
  EXPECT_TRUE(sb.call(reviewer, "write_file", {{"path", "review/review.md"}, {"content", "ok\n"}}).ok);
  EXPECT_TRUE(sb.call(reviewer, "write_file", {{"path", "@ckb/contracts/matmul.toml"}, {"content", "x"}}).violation);  // CKB read-only
  EXPECT_TRUE(sb.call(reviewer, "run_command", {{"command", "true"}}).violation);
  EXPECT_EQ(sb.violations().size(), 4u);

  // Reading the CKB through its prefix, searching it; ordinary errors are not violations.
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome c = sb.call(impl, "read_file", {{"path", "@ckb/contracts/matmul.toml"}});
  EXPECT_TRUE(c.ok);
  EXPECT_NE(c.output.find("GEMV"), std::string::npos);
  const ToolOutcome s = sb.call(impl, "search_ckb", {{"query", "gemv"}});
  EXPECT_NE(s.output.find("@ckb/contracts/matmul.toml:2:"), std::string::npos) << s.output;
  const ToolOutcome missing = sb.call(impl, "read_file", {{"path", "src/nope.cpp"}});
  EXPECT_FALSE(missing.ok);
  EXPECT_FALSE(missing.violation);
  const ToolOutcome twice = sb.call(impl, "edit_file", {{"path", "src/kernel.cpp"}, {"old", "zzz"}, {"new", "y"}});
  EXPECT_FALSE(twice.ok);
  EXPECT_EQ(sb.violations().size(), 4u);
  const ToolOutcome e = sb.call(impl, "edit_file", {{"path", "src/kernel.cpp"}, {"old", "return 1;"}, {"new", "return 2;\n  // two"}});
  EXPECT_TRUE(e.ok) << e.output;
  EXPECT_EQ(e.lines_added, 2);
  EXPECT_EQ(e.lines_removed, 1);
  EXPECT_EQ(slurp(w.run / "src/kernel.cpp"), "int f() { return 2;\n  // two }\n");
}

TEST(AgentSandbox, CommandsRunInTheRunDirectoryWithoutNetworkAndWithLimits) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no bubblewrap or unshare -n here: run_command refuses";
  World w;
  mi_test::ScriptedLlmServer listener(json::object());  // something listening on the host's loopback
  const std::string connect = "echo > /dev/tcp/127.0.0.1/" + std::to_string(listener.port());
  // Control: the same connection works from the host, so the refusal below is the sandbox's doing.
  ASSERT_EQ(mi::process::run({"/bin/bash", "-c", connect}).exit_code, 0);
  SandboxConfig cfg = w.config();
  cfg.max_output_bytes = 100;
  ToolSandbox sb(cfg);
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome net = sb.call(impl, "run_command", {{"command", connect}});
  EXPECT_FALSE(net.ok) << net.output;
  const ToolOutcome pwd = sb.call(impl, "run_command", {{"command", "pwd; cat src/kernel.cpp"}});
  EXPECT_TRUE(pwd.ok) << pwd.output;
  EXPECT_NE(pwd.output.find(fs::canonical(w.run).string()), std::string::npos) << pwd.output;
  EXPECT_NE(pwd.output.find("return 1"), std::string::npos);
  const ToolOutcome loud = sb.call(impl, "run_command", {{"command", "seq 1 100000; echo THE-END"}});
  EXPECT_TRUE(loud.ok);
  EXPECT_NE(loud.output.find("cut to its last 100 bytes"), std::string::npos);
  EXPECT_NE(loud.output.find("THE-END"), std::string::npos);
  const ToolOutcome slow = sb.call(impl, "run_command", {{"command", "sleep 20"}, {"timeout_s", 1}});
  EXPECT_FALSE(slow.ok);
  EXPECT_NE(slow.output.find("timed out"), std::string::npos);
  const ToolOutcome fails = sb.call(impl, "run_command", {{"command", "exit 3"}});
  EXPECT_NE(fails.output.find("exit status 3"), std::string::npos);
  if (command_isolation().kind == IsolationKind::bubblewrap) {
    // The reference checkout is not mounted, and the host's environment (API keys) is not passed in.
    ::setenv("OPENAI_API_KEY", "sk-secret-for-test", 1);
    const ToolOutcome env = sb.call(impl, "run_command", {{"command", "env; ls " + w.dir.path().string()}});
    ::unsetenv("OPENAI_API_KEY");
    EXPECT_TRUE(env.ok) << env.output;
    EXPECT_EQ(env.output.find("sk-secret"), std::string::npos) << env.output;
    const ToolOutcome hidden = sb.call(impl, "run_command", {{"command", "cat $(dirname $PWD)/reference/vllm/attention.py"}});
    EXPECT_EQ(hidden.output.find("return q"), std::string::npos) << hidden.output;
  }
}

// SWITCH=OFF holds for shell commands as for read_file/write_file: a command that names a reference tree is refused
// unrun; output carrying a foreign signature is withheld; a file a command writes with one is undone. Each counts.
TEST(AgentSandbox, CommandsCannotBypassTheSourceSwitch) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "with references configured, commands need bubblewrap";
  World w;
  write(w.run / "src/copied.py", "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nimport torch\n");
  ToolSandbox sb(w.config(SourceSwitch::off));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");

  const ToolOutcome ref = sb.call(impl, "run_command", {{"command", "cat " + (w.ref / "vllm/attention.py").string()}});
  EXPECT_TRUE(ref.violation);
  EXPECT_EQ(ref.output.find("return q"), std::string::npos) << ref.output;
  ASSERT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.violations()[0].rule, "reference_path");

  const ToolOutcome cat = sb.call(impl, "run_command", {{"command", "cat src/copied.py"}});
  EXPECT_TRUE(cat.violation);
  EXPECT_FALSE(cat.ok);
  EXPECT_EQ(cat.output.find("import torch"), std::string::npos) << cat.output;
  EXPECT_EQ(cat.output.find("SPDX"), std::string::npos) << cat.output;
  EXPECT_NE(cat.output.find("withheld"), std::string::npos) << cat.output;

  const std::string kernel = slurp(w.run / "src/kernel.cpp");
  const ToolOutcome wrote = sb.call(impl, "run_command",
                                    {{"command", "printf 'from transformers import AutoModel\\n' > src/x.py; printf '#include \"ggml.h\"\\n' >> src/kernel.cpp"}});
  EXPECT_TRUE(wrote.violation) << wrote.output;
  EXPECT_FALSE(fs::exists(w.run / "src/x.py"));
  EXPECT_EQ(slurp(w.run / "src/kernel.cpp"), kernel);  // restored
  EXPECT_EQ(wrote.edits, 0);
  ASSERT_EQ(sb.violations().size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(sb.violations()[i].rule, "foreign_signature") << sb.violations()[i].detail;
  EXPECT_EQ(sb.violations()[2].path, "src/kernel.cpp");
  EXPECT_EQ(sb.violations()[3].path, "src/x.py");
}

// Shell-made edits are measured like write_file's, and a command's changes outside the role's write paths are undone.
TEST(AgentSandbox, CommandEditsAreCountedAndChangesOutsideTheWritePathsUndone) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  World w;
  write(w.run / "plan.json", "{\"covered\": true}\n");
  write(w.run / "build/CMakeCache.txt", "old\n");
  SandboxConfig cfg = w.config();
  cfg.reference_paths.clear();  // the unshare fallback may run commands when there is no reference to hide
  ToolSandbox sb(cfg);
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome ok = sb.call(impl, "run_command",
                                 {{"command", "printf 'a\\nb\\n' > src/new.cpp; printf 'int g();\\n' >> src/kernel.cpp; echo new > build/CMakeCache.txt"}});
  EXPECT_TRUE(ok.ok) << ok.output;
  EXPECT_FALSE(ok.violation);
  EXPECT_EQ(ok.edits, 2);  // build/ is scratch: not an edit, not a violation
  EXPECT_EQ(ok.lines_added, 3);
  EXPECT_EQ(ok.lines_removed, 0);
  EXPECT_EQ(slurp(w.run / "build/CMakeCache.txt"), "new\n");

  const ToolOutcome bad = sb.call(impl, "run_command",
                                  {{"command", "echo forged > exploration.md; echo '{}' > plan.json; rm src/new.cpp"}});
  EXPECT_TRUE(bad.violation) << bad.output;
  EXPECT_FALSE(fs::exists(w.run / "exploration.md"));
  EXPECT_EQ(slurp(w.run / "plan.json"), "{\"covered\": true}\n");
  EXPECT_FALSE(fs::exists(w.run / "src/new.cpp"));  // inside the write paths: a removal is an edit
  EXPECT_EQ(bad.edits, 1);
  EXPECT_EQ(bad.lines_removed, 2);
  ASSERT_EQ(sb.violations().size(), 2u);
  EXPECT_EQ(sb.violations()[0].path, "exploration.md");
  EXPECT_EQ(sb.violations()[0].rule, "write_not_granted");
  EXPECT_EQ(sb.violations()[1].path, "plan.json");
}

TEST(AgentSandbox, TheUnshareFallbackIsRefusedWhenItCannotHideTheReferences) {
  const Isolation unshare{IsolationKind::unshare_net, "unshare -n: no network; file system NOT confined for commands"};
  try {
    require_isolation_for(unshare, SourceSwitch::off, true);
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bubblewrap"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unshare -n"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_isolation_for(unshare, SourceSwitch::off, false));  // nothing to hide
  EXPECT_NO_THROW(require_isolation_for(unshare, SourceSwitch::on, true));    // no role with run_command reads them anyway; mounts hide them under bubblewrap only
  EXPECT_NO_THROW(require_isolation_for({IsolationKind::bubblewrap, "bubblewrap"}, SourceSwitch::off, true));
}

TEST(AgentSandbox, SignaturesAndGlobs) {
  EXPECT_TRUE(find_foreign_signature("x\n  import vllm\n"));
  EXPECT_FALSE(find_foreign_signature("we do not import vllm here"));
  EXPECT_EQ(find_foreign_signature("# Copyright 2024 The HuggingFace Inc. team.")->framework, "transformers");
  EXPECT_EQ(find_foreign_signature("#include \"ggml-backend.h\"")->framework, "llama.cpp");
  EXPECT_TRUE(path_glob_match("tests/**", "tests/a/b.cpp"));
  EXPECT_TRUE(path_glob_match("src/**", "src/x.cpp"));
  EXPECT_FALSE(path_glob_match("src/*.cpp", "src/sub/x.cpp"));
  EXPECT_FALSE(path_glob_match("src/**", "srcx/a"));
  EXPECT_EQ(parse_source_switch("ON"), SourceSwitch::on);
  EXPECT_THROW(parse_source_switch("maybe"), mi::Error);
}

}  // namespace
