// `metainfer generate --backend agents` where no engine build is needed: an implementer that plants a gate script
// through its shell has the change undone and counted (the engine is never built), and the flags' bad-input errors.
// The end-to-end run with the real gates is generate_agents_test.cpp.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/engine_generation.h"
#include "agents/isolated_command.h"
#include "agents_test_support.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;

TEST(AgentGenerateCli, ImplementerTamperingWithTheTestContractsIsRefusedAndUndone) {
  if (mi::agents::command_isolation().kind == mi::agents::IsolationKind::none) GTEST_SKIP() << "run_command needs isolation";
  mi_test::TempDir dir("agents-generate-tamper");
  const fs::path engine = dir / "engine";
  // First through the file tools, then through its shell (a new protected file): both refused, both violations. The
  // endpoint then stops, so the stage ends before any gate, and the engine is never built.
  const std::string planted = "mkdir -p gates && echo 'exit 0' > gates/basic_execution.sh";
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"system_contains", "main agent"}}}, {"respond", {{"text", "Stages in order; nothing to add."}}}},
      {{"respond", {{"tool_calls", {call("w", "write_file", {{"path", "tests/stage_basic_execution_test.cpp"}, {"content", "int main() {}\n"}})}}}}},
      {{"expect", {{"body_contains", {"protected"}}}},
       {"respond", {{"tool_calls", {call("c", "run_command", {{"command", planted}})}}}}},
      {{"expect", {{"body_contains", {"gates/basic_execution.sh", "undone"}}}}, {"respond", {{"status", 400}, {"error", "stop here"}}}},
  })}});
  const auto r = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "-o",
                                     engine.string(), "--backend", "agents", "--no-review", "--llm-url", server.base_url() + "/v1",
                                     "--llm-model", "scripted", "--llm-attempts", "1"},
                                    300);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  const json last = mi_test::last_json_line(r.out);
  EXPECT_EQ(last["state"], "AGENT_ERROR:basic_execution") << r.out;
  EXPECT_TRUE(last["final_gates"].is_null());
  EXPECT_TRUE(last["experiment_summary"].is_null());  // the endpoint failed: no further role is started
  EXPECT_FALSE(fs::exists(engine / "build"));  // no gate ran, nothing was built
  EXPECT_FALSE(fs::exists(engine / "gates/basic_execution.sh"));
  EXPECT_NE(slurp(engine / "tests/stage_basic_execution_test.cpp").find("TEST("), std::string::npos);
  const json metrics = json::parse(slurp(engine / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["violations"], 2) << metrics["violations"].dump(1);
  EXPECT_EQ(metrics["violations"][1]["path"], "gates/basic_execution.sh");
  EXPECT_EQ(metrics["violations"][1]["rule"], "protected_path");
}

// What each stage's implementer is told: the CKB's stages in order, each with only this engine's contracts of the
// stage and the files implementing them.
TEST(AgentGenerateCli, StageBriefsNameThisEnginesContractsAndFiles) {
  mi_test::TempDir dir("agents-generate-briefs");
  const fs::path engine = dir / "engine";
  const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                       "-o", engine.string(), "--no-verify"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const mi::ckb::Ckb ckb = mi::ckb::load(fs::path(METAINFER_SOURCE_DIR) / "ckb");
  const auto briefs = mi::agents::engine_stage_briefs(ckb, engine);
  ASSERT_EQ(briefs.size(), 3u);
  EXPECT_EQ(briefs[0].stage, "basic_execution");
  EXPECT_EQ(briefs[1].stage, "model_components");
  EXPECT_EQ(briefs[2].stage, "framework_integration");
  auto has = [](const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  EXPECT_TRUE(has(briefs[0].files, "src/kernels/avx2/avx2.cpp"));
  EXPECT_TRUE(has(briefs[1].files, "src/model/attention.h"));
  EXPECT_FALSE(has(briefs[0].files, "src/model/attention.h"));
  std::vector<std::string> model_contracts;
  for (const auto* c : briefs[1].contracts) model_contracts.push_back(c->id);
  EXPECT_TRUE(has(model_contracts, "gqa_attention"));
  EXPECT_FALSE(has(model_contracts, "gated_delta_rule"));  // a dense Qwen3 has no Gated DeltaNet to write
  EXPECT_NE(briefs[1].objective.find("tests/stage_model_components_test.cpp"), std::string::npos);
  EXPECT_THROW(mi::agents::engine_stage_briefs(ckb, dir.path()), mi::Error);  // no engine there
}

TEST(AgentGenerateCli, BadInputExitsTwoBeforeAnythingIsWritten) {
  mi_test::TempDir dir("agents-generate-bad");
  const std::string model = mi_test::golden("qwen3-tiny").string();
  // An LLM flag with the knowledge backend would be ignored silently: refused instead.
  const auto knowledge = mi_test::metainfer({"generate", "--model", model, "-o", (dir / "a").string(), "--llm-url", "http://127.0.0.1:9/v1"});
  EXPECT_EQ(knowledge.exit_code, 2);
  EXPECT_NE(knowledge.err.find("--llm-url applies to --backend agents only"), std::string::npos) << knowledge.err;
  const auto no_verify = mi_test::metainfer({"generate", "--model", model, "-o", (dir / "b").string(), "--backend", "agents", "--no-verify",
                                             "--llm-model", "m"});
  EXPECT_EQ(no_verify.exit_code, 2);
  EXPECT_NE(no_verify.err.find("--no-verify"), std::string::npos) << no_verify.err;
  ::unsetenv("OPENAI_MODEL");
  const auto no_model = mi_test::metainfer({"generate", "--model", model, "-o", (dir / "c").string(), "--backend", "agents"});
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.err.find("--llm-model"), std::string::npos) << no_model.err;
  const auto backend = mi_test::metainfer({"generate", "--model", model, "-o", (dir / "d").string(), "--backend", "llm"});
  EXPECT_EQ(backend.exit_code, 2);
  for (const char* d : {"a", "b", "c", "d"}) EXPECT_FALSE(fs::exists(dir / d)) << d;
}

}  // namespace
