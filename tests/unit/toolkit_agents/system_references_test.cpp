// Foreign framework sources installed under the system directories commands see (/usr) are found and hidden: a
// planted system tree stands in for /usr, which a test should not write (the one host-planting test is opt-in).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "../toolkit_support.h"
#include "agents/isolated_command.h"
#include "agents/system_references.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;

TEST(AgentSystemReferences, FrameworkPackagesUnderUsrAreFoundByNameAndBySignature) {
  mi_test::TempDir root("sysrefs");
  const fs::path dist = root / "usr/lib/python3/dist-packages", site = root / "usr/local/lib/python3.11/site-packages";
  write(dist / "transformers/__init__.py", "__version__ = '4.0'\n");          // by its name
  write(dist / "transformers-4.0.dist-info/METADATA", "Name: transformers\n");  // metadata, no source
  write(site / "vllm/engine.py", "x = 1\n");
  write(site / "renamed_models/__init__.py", "# Copyright 2024 The HuggingFace Inc. team.\n");  // by its signature
  write(site / "helper.py", "import vllm\n");                                                     // a module, by its signature
  write(site / "numpy/__init__.py", "import math\n");                                             // innocent
  write(root / "usr/share/llama.cpp/convert.py", "x\n");
  write(root / "usr/local/include/ggml-backend.h", "#pragma once\n");
  write(root / "usr/include/stdio.h", "#pragma once\n");
  write(root / "usr/src/vllm/setup.py", "x\n");
  EXPECT_EQ(system_reference_trees(root.path()),
            (std::vector<fs::path>{root / "usr/lib/python3/dist-packages/transformers", root / "usr/local/include/ggml-backend.h",
                                   site / "helper.py", site / "renamed_models", site / "vllm", root / "usr/share/llama.cpp",
                                   root / "usr/src/vllm"}));
}

// Found by review: foreign sources a standard install puts outside those directories. llama.cpp's `cmake --install`
// copies convert_hf_to_gguf.py (line-initial `import gguf`) into ${CMAKE_INSTALL_BINDIR}, /usr/local/bin; an egg install
// puts its packages one level down, in <name>-<version>.egg/. Programs and innocent scripts there stay visible.
TEST(AgentSystemReferences, InstalledScriptsAndEggPackagesAreFound) {
  mi_test::TempDir root("sysrefs-bin");
  write(root / "usr/local/bin/convert_hf_to_gguf.py", "#!/usr/bin/env python3\nimport gguf\nclass TextModel:\n    pass\n");
  write(root / "usr/bin/vllm", "#!/usr/bin/python3\nimport sys\nfrom vllm.entrypoints.cli.main import main\nsys.exit(main())\n");
  write(root / "usr/bin/innocent", "#!/bin/sh\necho hello\n");
  write(root / "usr/bin/program", std::string("\x7f" "ELF") + " import gguf\n");  // not a script: no text to judge
  const fs::path dist = root / "usr/local/lib/python3.11/dist-packages";
  const fs::path egg = dist / "vllm-0.6.3-py3.11-linux-x86_64.egg", renamed = dist / "helpers-1.0.egg";
  write(egg / "vllm/__init__.py", "x = 1\n");
  write(egg / "EGG-INFO/PKG-INFO", "Name: vllm\n");
  write(renamed / "models/__init__.py", "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n");
  write(renamed / "numpy_like/__init__.py", "import math\n");
  EXPECT_EQ(system_reference_trees(root.path()),
            (std::vector<fs::path>{root / "usr/bin/vllm", root / "usr/local/bin/convert_hf_to_gguf.py", renamed / "models", egg / "vllm"}));
}

TEST(AgentSystemReferences, CommandsCannotReadTheHostsInstalledTrees) {
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no confining isolation here";
  const auto& trees = host_system_reference_trees();
  if (trees.empty()) GTEST_SKIP() << "no foreign framework is installed under this machine's /usr";
  mi_test::TempDir dir("sysrefs-run");
  const std::string target = fs::is_directory(trees.front()) ? "ls -A " + trees.front().string() + " | wc -l" : "wc -c < " + trees.front().string();
  const CommandResult r = run_isolated_command(target, dir.path(), {}, 30, 4096);
  EXPECT_EQ(r.output.substr(0, r.output.find_first_not_of("0123456789")), "0") << trees.front() << ": " << r.output;
}

// Found by review, on the real host (opt-in: METAINFER_TEST_PLANT_HOST=1, as root; plants a file in /usr/local/bin
// for the length of the test): an installed script carrying a signature was readable by the implementer's shell with
// SWITCH=OFF, and a slice of it without the marker line came back whole and uncounted. Now it is hidden and naming it
// counts. The host's trees are found once per process, so run it in a process of its own (as ctest does).
TEST(AgentSystemReferences, AnImplementersShellCannotReadAnInstalledConverterScript) {
  if (!std::getenv("METAINFER_TEST_PLANT_HOST")) GTEST_SKIP() << "plants a file in /usr/local/bin; set METAINFER_TEST_PLANT_HOST=1";
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  const fs::path planted = "/usr/local/bin/mi_test_convert_hf_to_gguf.py";
  struct Remove {
    fs::path p;
    ~Remove() { std::error_code ec; fs::remove(p, ec); }
  } remove{planted};
  std::ofstream(planted) << "#!/usr/bin/env python3\nimport gguf\nREFERENCE_BODY_LINE = 'rope_theta handling'\n";
  mi_test::TempDir dir("sysrefs-bin-host");
  SandboxConfig c;
  c.run_dir = dir.path();
  c.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  c.command_timeout_s = 30;
  ToolSandbox sb(c);
  const AgentRoleSpec implementer = find_role(c.ckb_dir / "roles", "implementer");
  const ToolOutcome whole = sb.call(implementer, "run_command", {{"command", "cat " + planted.string()}});
  const ToolOutcome slice = sb.call(implementer, "run_command", {{"command", "tail -n 1 " + planted.string()}});
  for (const ToolOutcome* o : {&whole, &slice}) {
    EXPECT_EQ(o->output.find("REFERENCE_BODY_LINE"), std::string::npos) << o->output;
    EXPECT_TRUE(o->violation) << o->output;
  }
}

}  // namespace
