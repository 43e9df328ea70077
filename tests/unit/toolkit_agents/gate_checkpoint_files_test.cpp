// What of a checkpoint the gates show agent-written code: its allow-listed data files only (checkpoint_data_files),
// never a golden case's answers, which a static initializer in the stage tests would otherwise print into the next
// round's evidence.
#include <gtest/gtest.h>

#include <algorithm>

#include "../toolkit_support.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;
using nlohmann::json;

// Found by review: agent-written code linked into a stage test reads the golden trace by its absolute path inside the stage
// gate's isolation, and the verifier's evidence would hand it to the next round's implementer (no filter but the
// foreign signature one): gates mount only the checkpoint's allow-listed data files (checkpoint_data_files). The engine's checkpoint is the golden case itself, as in AgentGenerate.* and `generate --model
// tests/data/golden/...` (the hf_trace route to PASS_VERIFIED).
TEST(AgentGateCheckpointFiles, AgentCodeInTheStageGateCannotReadTheGoldenTraceIntoTheEvidence) {
  if (command_isolation().kind != IsolationKind::bubblewrap) GTEST_SKIP() << "the engine gate needs bubblewrap";
  mi_test::TempDir dir("gate-golden");
  const fs::path run = dir / "engine";
  const fs::path golden = mi_test::golden("qwen3-tiny");
  agents_test::write_small_engine(run, golden);
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

// Found by review (defence in depth: the index is the checkpoint's, not agent-written): the shard names the
// index lists are allowed by plain file name, whatever they are, so an index that names the golden answers mounts them.
TEST(AgentGateCheckpointFiles, AShardIndexCannotNameTheGoldenAnswers) {
  mi_test::TempDir dir("rv-shards");
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

}  // namespace
