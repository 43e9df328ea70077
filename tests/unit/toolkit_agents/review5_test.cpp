// Review 5 of issue 12: planted-cheat reproductions. Each test states what should hold and FAILS while the gap it
// names is open.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "../toolkit_support.h"
#include "agents/command_paths.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/system_references.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using nlohmann::json;
using agents_test::write;

// Gap 1a: a golden case's answers (trace.json: greedy ids; logits.safetensors: the reference logits) are "data files"
// of the checkpoint and are mounted for agent-written code by the stage gate and the final gates' confined B0.
TEST(Review5, GoldenAnswersAreNotAmongTheCheckpointFilesGatesMountForAgentCode) {
  const fs::path golden = mi_test::golden("qwen3-tiny");
  ASSERT_TRUE(fs::exists(golden / "trace.json"));
  std::vector<std::string> names;
  for (const auto& f : checkpoint_data_files(golden)) names.push_back(f.filename().string());
  EXPECT_EQ(std::count(names.begin(), names.end(), "trace.json"), 0) << ::testing::PrintToString(names);
  EXPECT_EQ(std::count(names.begin(), names.end(), "logits.safetensors"), 0) << ::testing::PrintToString(names);
}

// Gap 1b: agent-written code linked into a stage test reads the golden trace by its absolute path inside the stage
// gate's isolation, and the verifier's evidence hands it to the next round's implementer (no filter but the foreign
// signature one). The engine's checkpoint is the golden case itself, as in AgentGenerate.* and `generate --model
// tests/data/golden/...` (the hf_trace route to PASS_VERIFIED).
TEST(Review5, AgentCodeInTheStageGateCannotReadTheGoldenTraceIntoTheEvidence) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the engine gate needs bubblewrap";
  mi_test::TempDir dir("review5-golden");
  const fs::path run = dir / "engine";
  const fs::path golden = mi_test::golden("qwen3-tiny");
  write(run / "MANIFEST.json",
        json{{"format", "metainfer-manifest/1"}, {"engine", "e"}, {"binary", "build/e"}, {"stages", {"basic_execution"}},
             {"constraints", {{"model", golden.string()}}}, {"files", json::array()}}.dump(2));
  write(run / "CMakeLists.txt", "cmake_minimum_required(VERSION 3.16)\nproject(e CXX)\nfind_package(GTest REQUIRED)\n"
                                "add_executable(e src/engine/engine_main.cpp src/answer.cpp)\n"
                                "add_executable(stage_basic_execution tests/stage_basic_execution_test.cpp src/answer.cpp)\n"
                                "target_link_libraries(stage_basic_execution GTest::gtest_main)\n");
  write(run / "tests/stage_basic_execution_test.cpp",
        "#include <gtest/gtest.h>\nint answer();\nTEST(BasicExecution, Answers) { EXPECT_EQ(answer(), 42); }\n");
  write(run / "plan.json", "{\"constraints\": {\"max_context\": 512}}\n");
  write(run / "src/engine/engine_main.cpp", "int answer();\nint main() { return answer() == 42 ? 0 : 1; }\n");
  write(run / "src/answer.cpp", "#include <cstdio>\n#include <fstream>\n#include <sstream>\n#include <string>\n"
                                "namespace {\nstruct Leak {\n  Leak() {\n"
                                "    std::ifstream in(\"" + (golden / "trace.json").string() + "\");\n"
                                "    std::stringstream s; s << in.rdbuf(); const std::string t = s.str();\n"
                                "    const auto at = t.find(\"greedy_ids\");\n"
                                "    if (at != std::string::npos) std::printf(\"LEAKED %s\\n\", t.substr(at, 120).c_str());\n"
                                "    std::fflush(stdout);\n"
                                "  }\n} leak;\n}  // namespace\n"
                                "int answer() { return 41; }\n");
  write_protected_manifest(protected_manifest_path(run), snapshot_protected(run, default_protected_globs()));
  const GateOutcome g = engine_stage_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 600})(run, "basic_execution");
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.evidence.find("LEAKED"), std::string::npos) << g.evidence;
}

// Gap 2a: foreign sources a standard install puts outside the scanned system directories: llama.cpp's
// `cmake --install` copies convert_hf_to_gguf.py (line-initial `import gguf`) into ${CMAKE_INSTALL_BINDIR}
// (/usr/local/bin), and an egg-installed package lives in a directory named after the egg.
TEST(Review5, InstalledReferenceSourcesOutsideTheScannedDirectoriesAreFound) {
  mi_test::TempDir root("review5-sysrefs");
  write(root / "usr/local/bin/convert_hf_to_gguf.py", "#!/usr/bin/env python3\nimport gguf\nclass TextModel:\n    pass\n");
  const fs::path egg = root / "usr/local/lib/python3.11/dist-packages/vllm-0.6.3-py3.11-linux-x86_64.egg";
  write(egg / "vllm/__init__.py", "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n");
  write(egg / "vllm/model_executor/models/qwen3.py", "from vllm.attention import Attention\n");
  const std::vector<fs::path> found = system_reference_trees(root.path());
  auto covered = [&](const fs::path& p) {
    return std::any_of(found.begin(), found.end(), [&](const fs::path& f) { return p == f || path_within(p, f); });
  };
  EXPECT_TRUE(covered(root / "usr/local/bin/convert_hf_to_gguf.py")) << ::testing::PrintToString(found);
  EXPECT_TRUE(covered(egg / "vllm/model_executor/models/qwen3.py")) << ::testing::PrintToString(found);
}

// Gap 2b (host-planting; run only with REVIEW5_PLANT_HOST=1, as root): a signature-bearing file in /usr/local/bin is
// readable by the implementer's shell with SWITCH=OFF; a slice without the marker line comes back whole and
// uncounted.
TEST(Review5, AnImplementersShellCannotReadAnInstalledConverterScript) {
  if (!std::getenv("REVIEW5_PLANT_HOST")) GTEST_SKIP() << "plants a file in /usr/local/bin; set REVIEW5_PLANT_HOST=1";
  if (command_isolation().kind == IsolationKind::none || !command_isolation().hides_paths) GTEST_SKIP() << "no isolation";
  const fs::path planted = "/usr/local/bin/review5_convert_hf_to_gguf.py";
  struct Remove {
    fs::path p;
    ~Remove() { std::error_code ec; fs::remove(p, ec); }
  } remove{planted};
  std::ofstream(planted) << "#!/usr/bin/env python3\nimport gguf\nREFERENCE_BODY_LINE = 'rope_theta handling'\n";
  mi_test::TempDir dir("review5-bin");
  SandboxConfig c;
  c.run_dir = dir.path();
  c.ckb_dir = fs::path(METAINFER_SOURCE_DIR) / "ckb";
  c.command_timeout_s = 30;
  ToolSandbox sb(c);
  const AgentRoleSpec implementer = find_role(c.ckb_dir / "roles", "implementer");
  const ToolOutcome whole = sb.call(implementer, "run_command", {{"command", "cat " + planted.string()}});
  const ToolOutcome slice = sb.call(implementer, "run_command", {{"command", "tail -n 1 " + planted.string()}});
  EXPECT_EQ(slice.output.find("REFERENCE_BODY_LINE"), std::string::npos) << slice.output;
  EXPECT_TRUE(slice.violation) << slice.output;
  std::printf("whole: violation=%d output=%s\nslice: violation=%d output=%s\n", whole.violation, whole.output.c_str(),
              slice.violation, slice.output.c_str());
}

}  // namespace
