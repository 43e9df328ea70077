// The tool sandbox: role grants, path confinement, the source switch (paths and signatures), protected files and
// their hash manifest, and shell commands without network.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <fcntl.h>
#include <unistd.h>

#include "agents_test_support.h"
#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/command_audit.h"
#include "agents/command_paths.h"
#include "agents/isolated_command.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "agents/source_switch.h"
#include "agents/stage_loop.h"
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

// A file the parent holds open without O_CLOEXEC (as a transcript stream is) is not inherited by a command: writing to
// its fd number fails in the child and the file stays empty.
TEST(AgentSandbox, CommandsInheritNoOpenFilesBeyondTheStandardThree) {
  mi_test::TempDir dir("fd-leak");
  const std::string path = (dir.path() / "held.txt").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);  // no O_CLOEXEC on purpose
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::dup2(fd, 9), 9);
  const auto r = mi::process::run({"sh", "-c", "echo leaked >&9"});
  ::close(9);
  ::close(fd);
  EXPECT_NE(r.exit_code, 0) << "fd 9 was inherited: " << r.out << r.err;
  EXPECT_EQ(slurp(path), "");
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

// SWITCH=OFF holds for shell commands as for read_file/write_file: a command that names a reference tree or a file
// carrying a foreign signature is refused unrun; other output carrying a signature is withheld; a file a command
// writes with one is undone. Each counts.
TEST(AgentSandbox, CommandsCannotBypassTheSourceSwitch) {
  if (!command_isolation().hides_paths) GTEST_SKIP() << "with references configured, commands need an isolation that hides them";
  World w;
  write(w.run / "src/copied.py", "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\nimport torch\n");
  ToolSandbox sb(w.config(SourceSwitch::off));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");

  const ToolOutcome ref = sb.call(impl, "run_command", {{"command", "cat " + (w.ref / "vllm/attention.py").string()}});
  EXPECT_TRUE(ref.violation);
  EXPECT_EQ(ref.output.find("return q"), std::string::npos) << ref.output;
  ASSERT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.violations()[0].rule, "reference_path");

  // A file carrying a signature is hidden from commands, and naming it is refused unrun
  // (command_signature_files_test.cpp has the re-encoding cases).
  const ToolOutcome cat = sb.call(impl, "run_command", {{"command", "cat src/copied.py"}});
  EXPECT_TRUE(cat.violation);
  EXPECT_FALSE(cat.ok);
  EXPECT_EQ(cat.output.find("import torch"), std::string::npos) << cat.output;
  EXPECT_NE(cat.output.find("not run"), std::string::npos) << cat.output;
  // Output that carries a signature from anywhere else (here, made up by the command) is still withheld.
  const ToolOutcome said = sb.call(impl, "run_command", {{"command", "printf 'import vll''m\\nimport torch\\n'"}});
  EXPECT_TRUE(said.violation);
  EXPECT_EQ(said.output.find("import torch"), std::string::npos) << said.output;
  EXPECT_NE(said.output.find("withheld"), std::string::npos) << said.output;

  const std::string kernel = slurp(w.run / "src/kernel.cpp");
  const ToolOutcome wrote = sb.call(impl, "run_command",
                                    {{"command", "printf 'from transformers import AutoModel\\n' > src/x.py; printf '#include \"ggml.h\"\\n' >> src/kernel.cpp"}});
  EXPECT_TRUE(wrote.violation) << wrote.output;
  EXPECT_FALSE(fs::exists(w.run / "src/x.py"));
  EXPECT_EQ(slurp(w.run / "src/kernel.cpp"), kernel);  // restored
  EXPECT_EQ(wrote.edits, 0);
  ASSERT_EQ(sb.violations().size(), 5u);
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(sb.violations()[i].rule, "foreign_signature") << sb.violations()[i].detail;
  EXPECT_EQ(sb.violations()[1].path, "src/copied.py");
  EXPECT_EQ(sb.violations()[3].path, "src/kernel.cpp");
  EXPECT_EQ(sb.violations()[4].path, "src/x.py");
}

// Shell-made edits are measured like write_file's, and a command's changes outside the role's write paths are undone.
// A dangling symlink survives weakly_canonical as a plain name inside the run directory; a hard link is the other
// file. Neither may lead a write elsewhere (the CKB, a staged delta): refused and counted, nothing written.
TEST(AgentSandbox, WritesThroughDanglingSymlinksAndHardLinksAreRefusedAndCounted) {
  World w;
  write(w.run / "ckb_delta/experience/answer.md", "# answer\nstaged.\n");
  fs::create_symlink(w.ckb / "contracts/EVIL.toml", w.run / "src/evil");          // dangling: its target is absent
  fs::create_directory_symlink(w.dir / "outside_dir", w.run / "src/evil_dir");    // dangling directory link
  fs::create_hard_link(w.run / "ckb_delta/experience/answer.md", w.run / "src/answer_note.md");
  ToolSandbox sb(w.config());
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome link = sb.call(impl, "write_file", {{"path", "src/evil"}, {"content", "id = \"evil\"\n"}});
  EXPECT_TRUE(link.violation) << link.output;
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.ckb / "contracts/EVIL.toml")));
  const ToolOutcome dir = sb.call(impl, "write_file", {{"path", "src/evil_dir/x.cpp"}, {"content", "int x;\n"}});
  EXPECT_TRUE(dir.violation) << dir.output;
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.dir / "outside_dir")));
  const ToolOutcome hard = sb.call(impl, "write_file", {{"path", "src/answer_note.md"}, {"content", "# answer\nrewritten after staging.\n"}});
  EXPECT_TRUE(hard.violation) << hard.output;
  const ToolOutcome edit = sb.call(impl, "edit_file", {{"path", "src/answer_note.md"}, {"old", "staged."}, {"new", "edited."}});
  EXPECT_TRUE(edit.violation) << edit.output;
  EXPECT_EQ(slurp(w.run / "ckb_delta/experience/answer.md"), "# answer\nstaged.\n");
  ASSERT_EQ(sb.violations().size(), 4u);
  EXPECT_EQ(sb.violations()[0].rule, "symlink");
  EXPECT_EQ(sb.violations()[1].rule, "symlink");
  EXPECT_EQ(sb.violations()[2].rule, "hard_link");
  EXPECT_EQ(sb.violations()[3].rule, "hard_link");
  // An ordinary file is written as before, and a symlink that stays inside resolves to its (writable) target.
  fs::create_symlink("kernel.cpp", w.run / "src/alias.cpp");
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "src/new.cpp"}, {"content", "int g();\n"}}).ok);
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "src/alias.cpp"}, {"content", "int f();\n"}}).ok);
  EXPECT_EQ(slurp(w.run / "src/kernel.cpp"), "int f();\n");
  EXPECT_EQ(sb.violations().size(), 4u);
}

// What a command leaves is judged for links too: a new hard link (even one whose other name lies in the skipped
// build tree) and a symlink leading out of the run directory (the CKB, a repository's withheld source) or to a
// protected path are undone and counted; a symlink that stays inside is an edit.
TEST(AgentSandbox, CommandsCannotLeaveHardLinksOrEscapingSymlinks) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  World w;
  write(w.run / "ckb_delta/experience/answer.md", "# answer\nstaged.\n");
  write(w.dir / "repo/components/attention.cpp", "int attention();\n");  // a withheld source's draft, outside the run
  SandboxConfig cfg = w.config();
  cfg.reference_paths.clear();
  ToolSandbox sb(cfg);
  const AgentRoleSpec impl = find_role(kRoles, "implementer");

  const ToolOutcome hard = sb.call(impl, "run_command", {{"command", "ln ckb_delta/experience/answer.md src/answer_note.md"}});
  EXPECT_TRUE(hard.violation) << hard.output;
  EXPECT_FALSE(fs::exists(w.run / "src/answer_note.md"));
  EXPECT_EQ(fs::hard_link_count(w.run / "ckb_delta/experience/answer.md"), 1u);
  EXPECT_EQ(slurp(w.run / "ckb_delta/experience/answer.md"), "# answer\nstaged.\n");

  const ToolOutcome hidden = sb.call(impl, "run_command", {{"command", "mkdir -p build && ln src/kernel.cpp build/k.cpp"}});
  EXPECT_TRUE(hidden.violation) << hidden.output;
  EXPECT_EQ(fs::hard_link_count(w.run / "src/kernel.cpp"), 1u);  // re-created: the build tree's name is another file now
  EXPECT_FALSE(fs::exists(w.run / "build/k.cpp"));                 // and the new name, judged in the build tree too, removed

  const std::string ckb_target = (fs::canonical(w.ckb) / "contracts/EVIL.toml").string();
  const std::string repo_target = (fs::canonical(w.dir.path()) / "repo/components/attention.cpp").string();
  const ToolOutcome out = sb.call(impl, "run_command", {{"command", "ln -s " + ckb_target + " src/evil; ln -s " + repo_target +
                                                                        " src/attention.cpp; ln -s ../../outside src/up"}});
  EXPECT_TRUE(out.violation) << out.output;
  for (const char* p : {"src/evil", "src/attention.cpp", "src/up"}) EXPECT_FALSE(fs::exists(fs::symlink_status(w.run / p))) << p;

  const ToolOutcome prot = sb.call(impl, "run_command", {{"command", "ln -s ../tests/stage_test.cpp src/contract.cpp"}});
  EXPECT_TRUE(prot.violation) << prot.output;
  EXPECT_FALSE(fs::exists(fs::symlink_status(w.run / "src/contract.cpp")));

  const ToolOutcome inside = sb.call(impl, "run_command", {{"command", "ln -s kernel.cpp src/alias.cpp"}});
  EXPECT_FALSE(inside.violation) << inside.output;
  EXPECT_EQ(inside.edits, 1);
  EXPECT_TRUE(fs::is_symlink(w.run / "src/alias.cpp"));

  std::map<std::string, int> rules;
  for (const auto& v : sb.violations()) ++rules[v.rule];
  // ln a b changes both names: the new one (hard_link) and the delta file the implementer may not write; the link
  // into the build tree is refused on both of its names.
  EXPECT_EQ(rules["hard_link"], 3) << ::testing::PrintToString(rules);
  EXPECT_EQ(rules["write_not_granted"], 1) << ::testing::PrintToString(rules);
  EXPECT_EQ(rules["symlink"], 4) << ::testing::PrintToString(rules);
}

TEST(AgentSandbox, CommandEditsAreCountedAndChangesOutsideTheWritePathsUndone) {
  if (command_isolation().kind == IsolationKind::none) GTEST_SKIP() << "no isolation here: run_command refuses";
  World w;
  write(w.run / "constraints.toml", "max_context = 512\n");
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
                                  {{"command", "echo forged > exploration.md; echo 'max_context = 2' > constraints.toml; rm src/new.cpp"}});
  EXPECT_TRUE(bad.violation) << bad.output;
  EXPECT_FALSE(fs::exists(w.run / "exploration.md"));
  EXPECT_EQ(slurp(w.run / "constraints.toml"), "max_context = 512\n");
  EXPECT_FALSE(fs::exists(w.run / "src/new.cpp"));  // inside the write paths: a removal is an edit
  EXPECT_EQ(bad.edits, 1);
  EXPECT_EQ(bad.lines_removed, 2);
  ASSERT_EQ(sb.violations().size(), 2u);
  EXPECT_EQ(sb.violations()[0].path, "constraints.toml");  // in path order
  EXPECT_EQ(sb.violations()[0].rule, "write_not_granted");
  EXPECT_EQ(sb.violations()[1].path, "exploration.md");
  EXPECT_EQ(sb.violations()[1].rule, "write_not_granted");
}

TEST(AgentSandbox, TheUnshareFallbackIsRefusedWhenItCannotHideTheReferences) {
  const Isolation plain{IsolationKind::unshare_net, "unshare -n: no network; file system NOT confined for commands", false};
  try {
    require_isolation_for(plain, true);
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bubblewrap"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unshare -n"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_isolation_for(plain, false));  // nothing to hide
  EXPECT_NO_THROW(require_isolation_for({IsolationKind::unshare_net, "unshare -n -m", true}, true));  // its mount namespace hides them
  EXPECT_NO_THROW(require_isolation_for({IsolationKind::bubblewrap, "bubblewrap", true}, true));
  // Whatever the switch: with SWITCH=ON a plain unshare would let the implementer's shell read what only the
  // explorer may, so the sandbox refuses the command before running it.
  if (command_isolation().kind == IsolationKind::unshare_net && !command_isolation().hides_paths) {
    World w;
    ToolSandbox sb(w.config(SourceSwitch::on));
    const ToolOutcome r = sb.call(find_role(kRoles, "implementer"), "run_command", {{"command", "echo hi"}});
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.output.find("refused"), std::string::npos) << r.output;
  }
}

// A reference tree is named by path, not by text: a sibling whose name extends the tree's is not the tree; "..",
// symlinks, an option's attached path, quoting and wildcards that reach into the tree are.
TEST(AgentSandbox, ACommandNamingAReferenceIsJudgedByCanonicalPathPrefix) {
  mi_test::TempDir dir("agents-command-paths");
  const fs::path refs = fs::canonical(dir.path()) / "refs", run = fs::canonical(dir.path()) / "run";
  const fs::path ref = refs / "vllm";
  write(ref / "secret.txt", "SECRET\n");
  write(refs / "vllm-other/other.txt", "OTHER\n");
  fs::create_directories(run / "src");
  fs::create_directory_symlink(ref, run / "src/link");
  const std::vector<fs::path> refs_list = {ref};
  auto named = [&](const std::string& command) { return named_reference_tree(command, run, refs_list).has_value(); };
  EXPECT_FALSE(named("cat " + (refs / "vllm-other/other.txt").string()));
  EXPECT_FALSE(named("cat " + refs.string() + "/vllm-*/other.txt"));
  EXPECT_FALSE(named("ls " + refs.string()));  // the parent directory is not the tree
  EXPECT_FALSE(named("echo vllm; cat src/../src"));
  EXPECT_TRUE(named("cat " + ref.string()));
  EXPECT_TRUE(named("cat " + (refs / "vllm-other/../vllm/secret.txt").string()));
  EXPECT_TRUE(named("cat ../refs/vllm/secret.txt"));        // relative to the run directory
  EXPECT_TRUE(named("cat src/link/secret.txt"));             // a symlink into the tree
  EXPECT_TRUE(named("cd /tmp && g++ -I" + ref.string() + "/include x.cpp"));
  EXPECT_TRUE(named("tool --file=" + ref.string() + "/secret.txt"));
  EXPECT_TRUE(named("cat \"" + ref.string() + "/a b.txt\""));
  EXPECT_TRUE(named("cat " + refs.string() + "/vll*/secret.txt"));
  EXPECT_TRUE(named("cat " + ref.string() + "/*.txt|head"));
  EXPECT_EQ(shell_words("a 'b c'\"d\"|e\\ f;g"), (std::vector<std::string>{"a", "b cd", "e f", "g"}));
  EXPECT_TRUE(path_within(ref / "x", ref));
  EXPECT_FALSE(path_within(refs / "vllm-other", ref));

  // Through the sandbox: the sibling is not refused (and, where the file system is the host's, read).
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "commands need an isolation that hides paths";
  SandboxConfig cfg;
  cfg.run_dir = run;
  cfg.reference_paths = {ref};
  cfg.command_timeout_s = 30;
  ToolSandbox sb(cfg);
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome sibling = sb.call(impl, "run_command", {{"command", "cat " + (refs / "vllm-other/other.txt").string() + " || true"}});
  EXPECT_FALSE(sibling.violation) << sibling.output;
  const ToolOutcome dotdot = sb.call(impl, "run_command", {{"command", "cat " + (refs / "vllm-other/../vllm/secret.txt").string()}});
  EXPECT_TRUE(dotdot.violation);
  EXPECT_EQ(dotdot.output.find("SECRET"), std::string::npos) << dotdot.output;
  ASSERT_EQ(sb.violations().size(), 1u);
  EXPECT_EQ(sb.violations()[0].rule, "reference_path");
  EXPECT_EQ(sb.violations()[0].path, ref.string());
}

// Sets METAINFER_AGENT_ISOLATION for one test.
struct ForcedIsolation {
  explicit ForcedIsolation(const char* kind) { ::setenv("METAINFER_AGENT_ISOLATION", kind, 1); }
  ~ForcedIsolation() { ::unsetenv("METAINFER_AGENT_ISOLATION"); }
};

// A trusted program (the engine gate's verifier) runs only where it can run with no shell around it: the unshare
// fallback refuses it rather than wrap it in a shell the judged code could reach.
TEST(AgentSandbox, ATrustedProgramIsRefusedWithoutBubblewrap) {
  ForcedIsolation forced("unshare");
  if (command_isolation().kind != IsolationKind::unshare_net || !command_isolation().hides_paths)
    GTEST_SKIP() << "no unshare with a mount namespace here: " << command_isolation().description;
  mi_test::TempDir dir("program-unshare");
  EXPECT_EQ(run_isolated_command("/bin/true", dir.path(), {}, 10, 100).exit_code, 0);  // a command still runs
  try {
    run_isolated_command("/bin/true", dir.path(), {}, 10, 100, {}, {}, {}, true, false, {"/bin/true"});
    ADD_FAILURE() << "a trusted program ran under the unshare fallback";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no shell around it"), std::string::npos) << e.what();
  }
}

// Without bubblewrap, the unshare fallback still leaks nothing: no network, its own PID namespace, a new root that
// holds the system, the run directory and the CKB only, the reference trees hidden (also from a command that builds
// their path at run time, with SWITCH=ON, and from the gate), mounts that cannot be undone, the CKB and the test
// contracts read-only.
TEST(AgentSandbox, TheUnshareFallbackHidesTheReferencesAndTheNetwork) {
  ForcedIsolation forced("unshare");
  if (command_isolation().kind != IsolationKind::unshare_net || !command_isolation().hides_paths)
    GTEST_SKIP() << "no unshare with a mount namespace here: " << command_isolation().description;
  World w;
  write(w.ref / "vllm/secret.txt", "SECRET-REFERENCE\n");
  write(w.dir / "reference-other/other.txt", "OTHER-TREE\n");
  const std::string ref = fs::canonical(w.ref).string();
  mi_test::ScriptedLlmServer listener(json::object());
  const std::string connect = "echo > /dev/tcp/127.0.0.1/" + std::to_string(listener.port());
  ASSERT_EQ(mi::process::run({"/bin/bash", "-c", connect}).exit_code, 0);

  ToolSandbox sb(w.config(SourceSwitch::on));
  const AgentRoleSpec impl = find_role(kRoles, "implementer");
  const ToolOutcome net = sb.call(impl, "run_command", {{"command", connect}});
  EXPECT_FALSE(net.ok) << net.output;
  // The path is built at run time, so the text check cannot see it: the mount namespace hides the tree.
  const std::string built = "d=$(echo " + ref.substr(0, ref.size() - 3) + ")$(echo nce); ";
  const ToolOutcome read = sb.call(impl, "run_command", {{"command", built + "cat $d/vllm/secret.txt; ls -a $d; umount $d; cat $d/vllm/secret.txt"}});
  // Where strace audits commands, the attempt is counted all the same (command_audit_test.cpp).
  EXPECT_EQ(read.violation, command_audit_available()) << read.output;
  EXPECT_EQ(read.output.find("SECRET-REFERENCE"), std::string::npos) << read.output;
  EXPECT_EQ(read.output.find("attention.py"), std::string::npos) << read.output;
  // The rest of the host's file system is not there: a sibling tree and the repository are out of sight, while the
  // toolchain (what /usr and /etc hold) works.
  const ToolOutcome other = sb.call(impl, "run_command", {{"command", "cat " + (fs::canonical(w.dir.path()) / "reference-other/other.txt").string() +
                                                                          "; ls " + METAINFER_SOURCE_DIR + "; ls /; true"}});
  EXPECT_EQ(other.output.find("OTHER-TREE"), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find("CMakeLists.txt"), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find("root\n"), std::string::npos) << other.output;  // /root is not in the new root
  const ToolOutcome cc = sb.call(impl, "run_command", {{"command", "printf 'int main() { return 7; }\\n' > src/t.c && mkdir -p build && cc src/t.c -o build/t && "
                                                                       "{ ./build/t; echo status=$?; }"}});
  EXPECT_NE(cc.output.find("status=7"), std::string::npos) << cc.output;
  // Its own PID namespace: the test's process (and every other host process) is not in its /proc, so no
  // /proc/PID/root leads back to the host's mounts.
  const std::string self = std::to_string(::getpid());
  const ToolOutcome pid = sb.call(impl, "run_command", {{"command", "test -e /proc/" + self + " && echo HOST-PID-VISIBLE; echo pid=$$; ls /proc/1/root/ | head -3"}});
  EXPECT_EQ(pid.output.find("HOST-PID-VISIBLE"), std::string::npos) << pid.output;
  EXPECT_NE(pid.output.find("pid=1\n"), std::string::npos) << pid.output;
  // The kernel's knobs are read-only (as root without capabilities /proc/sys's owner bits would let it write).
  const ToolOutcome knobs = sb.call(impl, "run_command", {{"command", "for f in /proc/sys/kernel/core_pattern /proc/sysrq-trigger; do "
                                                                        "test -w $f && echo WRITABLE $f; done; true"}});
  EXPECT_EQ(knobs.output.find("WRITABLE"), std::string::npos) << knobs.output;
  // Read-only: the CKB, and a test contract (and whatever the mounts miss, the snapshot undoes).
  const std::string contract = slurp(w.run / "tests/stage_test.cpp"), ckb_file = slurp(w.ckb / "contracts/matmul.toml");
  sb.call(impl, "run_command", {{"command", "echo x >> tests/stage_test.cpp; echo x >> " + (fs::canonical(w.ckb) / "contracts/matmul.toml").string()}});
  EXPECT_EQ(slurp(w.run / "tests/stage_test.cpp"), contract);
  EXPECT_EQ(slurp(w.ckb / "contracts/matmul.toml"), ckb_file);
  EXPECT_TRUE(sb.reference_accesses().empty());

  // The gate runs agent-written code under the same fallback, the references hidden.
  write(w.run / "gates/leak.sh", built + "cat $d/vllm/secret.txt\n");
  const GateOutcome g = script_gate(30, 16 * 1024, {fs::canonical(w.ref)})(w.run, "leak");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence.find("SECRET-REFERENCE"), std::string::npos) << g.evidence;
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
