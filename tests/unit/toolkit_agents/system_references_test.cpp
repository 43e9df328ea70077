// Foreign framework sources installed under the system directories commands see (/usr) are found and hidden: a
// planted system tree stands in for /usr, which a test should not write (the one host-planting test is opt-in).
#include <gtest/gtest.h>

#include <algorithm>
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

// Found by review: a zipped egg (setuptools' default for a zip-safe pure-Python package installed by
// `setup.py install` / easy_install: one file, <name>-<version>-pyX.Y.egg) holds the package's whole source; the scan
// descends only into egg *directories*, so the file is not hidden and `unzip -p` / Python's zipfile reads it.
TEST(AgentSystemReferences, AZippedEggIsFound) {
  mi_test::TempDir root("rv-egg");
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

// Found by review: on Fedora/RHEL/Rocky, `pip install` as root puts a platform wheel (vLLM, llama-cpp-python:
// compiled extensions, Root-Is-Purelib false) in platlib, /usr/local/lib64/python3.X/site-packages. python_package_dirs
// scans usr/lib, usr/local/lib and usr/lib64, not usr/local/lib64, and every command mounts /usr whole.
TEST(AgentSystemReferences, PlatformPackagesInUsrLocalLib64AreFound) {
  mi_test::TempDir root("rv-lib64");
  const fs::path pkg = root / "usr/local/lib64/python3.12/site-packages/vllm";
  write(pkg / "__init__.py", "from vllm.engine.llm_engine import LLMEngine\n");
  write(pkg / "model_executor/models/llama.py", "class LlamaAttention:\n    pass\n");
  const std::vector<fs::path> found = system_reference_trees(root.path());
  EXPECT_NE(std::find(found.begin(), found.end(), pkg), found.end()) << ::testing::PrintToString(found);
}

// Found by review (honest use; opt-in host-planting test, run alone, as root): a script in /usr/local/bin that is a symlink (`ln -s ~/llama.cpp/
// convert_hf_to_gguf.py /usr/local/bin/`, a usual way to put it on PATH) is found, since is_regular_file follows the
// link, and append_bwrap_hides binds /dev/null over the *link's* path: bubblewrap cannot create a mount point there
// ("bwrap: Can't create file at /usr/local/bin/...: No such file or directory") and every command, script gate, stage
// gate and acceptance sandbox on that host fails before it runs.
TEST(AgentSystemReferences, ASymlinkedScriptInUsrLocalBinDoesNotStopEveryCommand) {
  if (!std::getenv("METAINFER_TEST_PLANT_HOST")) GTEST_SKIP() << "plants a symlink in /usr/local/bin; set METAINFER_TEST_PLANT_HOST=1";
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "bubblewrap's behaviour";
  mi_test::TempDir dir("rv-symlink-host");
  const fs::path target = fs::canonical(dir.path()) / "llama.cpp/convert_hf_to_gguf.py";
  write(target, "#!/usr/bin/env python3\nimport gguf\nREFERENCE_BODY_LINE = 'rope_theta handling'\n");
  const fs::path link = "/usr/local/bin/mi_test_link_convert_hf_to_gguf.py";
  struct Remove {
    fs::path p;
    ~Remove() { std::error_code ec; fs::remove(p, ec); }
  } remove{link};
  fs::create_symlink(target, link);
  const auto& trees = host_system_reference_trees();  // first use in this process: sees the link
  EXPECT_NE(std::find(trees.begin(), trees.end(), link), trees.end());
  mi_test::TempDir run("rv-symlink-run");
  const CommandResult r = run_isolated_command("echo ran", run.path(), {}, 30, 4096);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ran"), std::string::npos) << r.output;
  const CommandResult read = run_isolated_command("cat " + link.string() + " || true", run.path(), {}, 30, 4096);
  EXPECT_EQ(read.output.find("REFERENCE_BODY_LINE"), std::string::npos) << read.output;
}

// A framework's tree with a version or variant in its name, under /usr/{,local/}src or share (framework_named).
TEST(AgentSystemReferences, VersionedFrameworkTreesUnderUsrAreFound) {
  mi_test::TempDir root("sysrefs-versioned");
  write(root / "usr/local/src/vllm-0.6.3/setup.py", "x\n");
  write(root / "usr/share/llama.cpp_b4000/convert.py", "x\n");
  write(root / "usr/share/vllmish/readme", "x\n");  // not a framework's name followed by - _ .
  const std::vector<fs::path> found = system_reference_trees(root.path());
  EXPECT_EQ(found, (std::vector<fs::path>{root / "usr/local/src/vllm-0.6.3", root / "usr/share/llama.cpp_b4000"}))
      << ::testing::PrintToString(found);
}

}  // namespace
