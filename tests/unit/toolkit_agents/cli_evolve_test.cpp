// `metainfer evolve <constraints.toml>`, the user-facing entry to knowledge-base evolution, against the scripted
// endpoint on loopback: entered only when coverage fails (the plan's gaps are the brief; plan.json and config.json
// the inputs), a delta that is consolidated and passes the candidate gate is NOT merged while the SWITCH=OFF
// regeneration fails; the failure analyst's report seeds the next round; an endpoint that stops mid-round leaves it
// resumable; the resumed round is absorbed and only then is the delta in the CKB. Each round starts with the
// orchestrator's strategy, and the evolution ends with the experiment summariser's report. The first test's gate is
// a protected script; RoundsOverAnEngineAreJudgedByTheRealStageGate runs the rounds over an engine under the real L1
// stage gate (four engine builds, one of them failing).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "../toolkit_support.h"
#include "agents/engine_gate.h"
#include "agents/engine_generation.h"
#include "agents/isolated_command.h"
#include "agents_test_support.h"
#include "process/subprocess.h"
#include "scripted_llm_server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using agents_test::call;
using agents_test::slurp;
using agents_test::write;

json write_step(const std::string& path, const std::string& content, json expect = json::object()) {
  json s = {{"respond", {{"tool_calls", {call("w", "write_file", {{"path", path}, {"content", content}})}}}}};
  if (!expect.empty()) s["expect"] = std::move(expect);
  return s;
}
const json kDone = {{"respond", {{"text", "done"}}}};

// A checkpoint no CKB family knows: the qwen3_next-tiny weights under an unknown architecture name.
fs::path uncovered_checkpoint(const fs::path& dir) {
  const fs::path unknown = dir / "unknown-arch";
  fs::create_directories(unknown);
  fs::copy_file(mi_test::golden("qwen3_next-tiny") / "model.safetensors", unknown / "model.safetensors");
  json config = json::parse(slurp(mi_test::golden("qwen3_next-tiny") / "config.json"));
  config["architectures"] = {"Qwen9HybridForCausalLM"};
  write(unknown / "config.json", config.dump(2));
  return unknown;
}

TEST(Evolve, DeltaMergedOnlyAfterTheSwitchOffRegenerationPassesAndResumeContinues) {
  if (mi::agents::command_isolation().kind == mi::agents::IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  mi_test::TempDir dir("evolve-top");
  const fs::path ckb = dir / "ckb", contracts = dir / "contracts", work = dir / "work";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  write(contracts / "gates/target.sh", "grep -qx 42 src/answer.txt || { echo 'src/answer.txt must hold 42'; exit 1; }\n");
  const std::string model = uncovered_checkpoint(dir.path()).string();
  const fs::path merged = ckb / "experience/qwen9_hybrid.md";
  auto evolve = [&](const mi_test::ScriptedLlmServer& server, std::vector<std::string> extra) {
    std::vector<std::string> args = {"evolve", "--model", model, "--work-dir", work.string(), "--contracts", contracts.string(), "--ckb",
                                     ckb.string(), "--max-repair-rounds", "0", "--llm-url", server.base_url() + "/v1", "--llm-model",
                                     "scripted", "--llm-attempts", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return mi_test::metainfer(args, 300);
  };

  // Round 1: explored, consolidated, the candidate passes, but the regeneration from the staged CKB alone fails:
  // nothing is merged; the failure analyst writes its report.
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("strategy/strategy.md", "Learn the answer for Qwen9Hybrid.\n",
                   {{"system_contains", "main agent"}, {"body_contains", {"Coverage detection found", "Qwen9HybridForCausalLM"}}}),
        kDone,
        write_step("exploration/notes.md", "Qwen9Hybrid: the answer is 42.\n",
                   {{"system_contains", "exploration agent"}, {"body_contains", {"Coverage detection found", "inputs/plan.json", "Qwen9HybridForCausalLM"}}}),
        kDone,
        write_step("ckb_delta/experience/qwen9_hybrid.md", "The answer is 42.\n"), kDone,  // consolidator
        write_step("src/answer.txt", "42\n"), kDone,                                     // candidate: passes
        write_step("src/answer.txt", "41\n", {{"body_contains", {"knowledge base only"}}}), kDone,  // regeneration: fails
        write_step("failure/analysis.md", "The regeneration wrote 41: the delta must say 42 plainly.\n",
                   {{"system_contains", "failure-analysis agent"}, {"body_contains", {"src/answer.txt must hold 42"}}}),
        kDone,
        write_step("experiment/summary.md", "Round 1 failed its regeneration.\n",
                   {{"system_contains", "experiment-summary agent"}, {"body_contains", {"FAILED:regenerate", "Figures measured by the workflow"}}}),
        kDone,
    })}});
    const auto r = evolve(server, {"--max-rounds", "1"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    EXPECT_EQ(mi_test::last_json_line(r.out)["state"], "FAILED") << r.out;
    EXPECT_FALSE(fs::exists(merged));  // the candidate passed, the regeneration did not: nothing reached the CKB
    const json round = json::parse(slurp(work / "evo-001/round.json"));
    EXPECT_EQ(round["state"], "FAILED:regenerate");
    EXPECT_EQ(round["candidate"]["state"], "PASSED");
    EXPECT_TRUE(fs::exists(work / "evo-001/candidate/inputs/plan.json"));
    EXPECT_TRUE(fs::exists(work / "evo-001/candidate/inputs/config.json"));
  }
  // Round 2, first session: the endpoint stops after the explorer: the round is left resumable.
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("strategy/strategy.md", "Say 42 plainly this time.\n",
                   {{"body_contains", {"previous round's strategy", "seed/failure.md"}}}),
        kDone,
        write_step("exploration/notes.md", "Say 42 plainly.\n", {{"body_contains", {"seed/failure.md", "must say 42 plainly"}}}),
        kDone,
    })}});
    const auto r = evolve(server, {"--resume", "--max-rounds", "2"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(mi_test::last_json_line(r.out)["state"], "INTERRUPTED") << r.out;
    EXPECT_EQ(json::parse(slurp(work / "evo-002/round.json"))["phase"], "consolidate");
    EXPECT_FALSE(fs::exists(merged));
  }
  // Round 2, resumed: it continues at the consolidation (no second exploration) and is absorbed. The delta also
  // teaches the qwen3_next family the new architecture name, so coverage run again on the merged CKB finds it covered.
  std::string family = slurp(fs::path(METAINFER_SOURCE_DIR) / "ckb/families/qwen3_next.toml");
  const std::string arch_line = "architectures = [\"Qwen3NextForCausalLM\"]";
  ASSERT_NE(family.find(arch_line), std::string::npos);
  family.replace(family.find(arch_line), arch_line.size(), "architectures = [\"Qwen3NextForCausalLM\", \"Qwen9HybridForCausalLM\"]");
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("ckb_delta/experience/qwen9_hybrid.md", "The answer is 42, plainly.\n", {{"system_contains", "consolidation agent"}}),
        write_step("ckb_delta/families/qwen3_next.toml", family), kDone,
        write_step("src/answer.txt", "42\n", {{"body_contains", {"strategy/strategy.md"}}}), kDone,
        write_step("src/answer.txt", "42\n"), kDone,
        write_step("experiment/summary.md", "Absorbed in round 2.\n", {{"body_contains", {"ABSORBED", "evo-002"}}}), kDone,
    })}});
    const auto r = evolve(server, {"--resume", "--max-rounds", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    const json last = mi_test::last_json_line(r.out);
    EXPECT_EQ(last["state"], "ABSORBED") << r.out;
    EXPECT_EQ(last["gate"], "script");
    ASSERT_TRUE(fs::exists(merged));
    EXPECT_NE(slurp(merged).find("evo-002"), std::string::npos) << slurp(merged);
    EXPECT_NE(slurp(ckb / "evolution/log.toml").find("evo-002"), std::string::npos);
    // ABSORBED, and the merged CKB now covers the constraints: said in the result, the round and the summary.
    EXPECT_EQ(last["coverage_after_merge"]["covered"], true) << r.out;
    EXPECT_EQ(last["coverage_after_merge"]["gaps"], json::array()) << r.out;
    EXPECT_EQ(json::parse(slurp(work / "evo-002/round.json"))["coverage_after_merge"]["covered"], true);
    EXPECT_NE(slurp(work / "summary.md").find("evo-002: the merged CKB covers the target"), std::string::npos) << slurp(work / "summary.md");
  }
  // 6 + 1 (the summary), then 3 (the third, the consolidator, stopped by the endpoint), then 3 + 1.
  const json metrics = json::parse(slurp(work / "metrics.json"));
  EXPECT_EQ(metrics["totals"]["agents_started"], 14) << metrics.dump(2);
  EXPECT_EQ(slurp(work / "final/experiment/summary.md"), "Absorbed in round 2.\n");
  EXPECT_EQ(slurp(work / "evo-002/candidate/strategy/strategy.md"), "Say 42 plainly this time.\n");
}

TEST(Evolve, ACoveredTargetNeedsNoRoundUnlessForced) {
  mi_test::TempDir dir("evolve-covered");
  const fs::path contracts = dir / "contracts";
  write(contracts / "gates/target.sh", "exit 1\n");
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      {{"expect", {{"body_contains", {"the evolution was forced"}}}}, {"respond", {{"status", 400}, {"error", "stop here"}}}},
  })}});
  const std::vector<std::string> common = {"evolve", "--model", mi_test::golden("qwen3-tiny").string(), "--contracts", contracts.string(),
                                           "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted", "--llm-attempts", "1"};
  std::vector<std::string> plain = common;
  plain.insert(plain.end(), {"--work-dir", (dir / "w1").string()});
  const auto c = mi_test::metainfer(plain, 60);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_EQ(mi_test::last_json_line(c.out)["state"], "COVERED");
  EXPECT_TRUE(server.requests().empty());
  EXPECT_FALSE(fs::exists(dir / "w1/evo-001"));
  // --force: the rounds start (the explorer's brief says it was forced); the endpoint refuses, so it stops resumable.
  std::vector<std::string> forced = common;
  forced.insert(forced.end(), {"--work-dir", (dir / "w2").string(), "--force"});
  const auto f = mi_test::metainfer(forced, 60);
  EXPECT_EQ(f.exit_code, 1) << f.out << f.err;
  EXPECT_EQ(mi_test::last_json_line(f.out)["state"], "INTERRUPTED") << f.out;
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  // Bad input: contracts without the stage's gate, neither a script nor an engine stage test.
  std::vector<std::string> bad = {"evolve", "--model", mi_test::golden("qwen3-tiny").string(), "--contracts", (dir / "nothing").string(),
                                  "--stage", "kernel", "--llm-model", "m"};
  const auto b = mi_test::metainfer(bad, 60);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("gates/kernel.sh"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("tests/stage_kernel_test.cpp"), std::string::npos) << b.err;
  // A work directory inside the contracts (every round's run directory gets a copy of them, so later rounds would
  // get earlier rounds' transcripts), or the reverse, is refused before anything is written.
  for (const auto& [work, contracts_dir] : {std::pair{contracts / "evolution", contracts}, std::pair{dir / "w3", dir / "w3/contracts"}}) {
    if (!fs::exists(contracts_dir / "gates/target.sh")) write(contracts_dir / "gates/target.sh", "exit 1\n");
    std::vector<std::string> nested = {"evolve", "--model", mi_test::golden("qwen3-tiny").string(), "--contracts", contracts_dir.string(),
                                       "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted", "--force", "--work-dir", work.string()};
    const auto n = mi_test::metainfer(nested, 60);
    EXPECT_EQ(n.exit_code, 2) << n.out << n.err;
    EXPECT_NE(n.err.find("give --work-dir outside it"), std::string::npos) << n.err;
    EXPECT_FALSE(fs::exists(work / "state.json"));
    EXPECT_FALSE(fs::exists(contracts / "evolution"));
  }
  EXPECT_EQ(server.requests().size(), 1u);
}

// Evolution over an engine: --contracts is an engine directory (generate --no-verify); candidate and regeneration
// are judged by the real L1 stage gate (the engine is built for each), and both start without the stage's own
// sources (withheld), so the CKB's draft alone passes nothing. Round 1: the candidate writes them and passes, the
// regeneration writes nothing and fails: nothing merged. Round 2 (resumed): both write them, and only then is the
// delta merged.
TEST(Evolve, RoundsOverAnEngineAreJudgedByTheRealStageGate) {
  if (mi::agents::command_isolation().kind != mi::agents::IsolationKind::bubblewrap) GTEST_SKIP() << "the engine gate runs under bubblewrap";
  mi_test::TempDir dir("evolve-engine");
  const fs::path ckb = dir / "ckb", engine = dir / "engine", work = dir / "work";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  const std::string model = mi_test::golden("qwen3-tiny").string();
  const auto gen = mi_test::metainfer({"generate", "--model", model, "--platform", "x86-64-avx2", "-o", engine.string(), "--no-verify"});
  ASSERT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  // The stage's own files, written by the scripted implementer with the contents the generator gave them.
  std::vector<std::string> files;
  for (const auto& b : mi::agents::engine_stage_briefs(mi::ckb::load(ckb), engine))
    if (b.stage == "basic_execution") files = b.files;
  ASSERT_FALSE(files.empty());
  const std::string kernel = "src/kernels/avx2/avx2.cpp";
  ASSERT_NE(std::find(files.begin(), files.end(), kernel), files.end());
  json writes = json::array();
  for (const auto& f : files) writes.push_back(call("w" + std::to_string(writes.size()), "write_file", {{"path", f}, {"content", slurp(engine / f)}}));
  const json write_sources = {{"expect", {{"body_contains", {"not in the run directory", kernel}}}}, {"respond", {{"tool_calls", writes}}}};
  const fs::path merged = ckb / "experience/rmsnorm_mean.md";
  const std::string delta = "# RMSNorm divides the sum of squares by n.\n";
  auto evolve = [&](const mi_test::ScriptedLlmServer& server, std::vector<std::string> extra) {
    std::vector<std::string> args = {"evolve", "--model", model, "--force", "--work-dir", work.string(), "--contracts", engine.string(),
                                     "--stage", "basic_execution", "--ckb", ckb.string(), "--max-repair-rounds", "0", "--llm-url",
                                     server.base_url() + "/v1", "--llm-model", "scripted", "--llm-attempts", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return mi_test::metainfer(args, 900);
  };
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("strategy/strategy.md", "Write the basic execution sources.\n"), kDone,
        write_step("exploration/notes.md", "RMSNorm: mean of squares.\n"), kDone,
        write_step("ckb_delta/experience/rmsnorm_mean.md", delta), kDone,
        write_sources, kDone,                                                            // candidate: written, passes
        {{"respond", {{"text", "Nothing to change."}}}},                                  // regeneration: silent, fails
        write_step("failure/analysis.md", "The regeneration wrote no source.\n", {{"body_contains", {"verification state: FAILED"}}}),
        kDone,
        {{"respond", {{"text", "No report."}}}},                                          // experiment summariser
    })}});
    const auto r = evolve(server, {"--max-rounds", "1"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    const json last = mi_test::last_json_line(r.out);
    EXPECT_EQ(last["state"], "FAILED") << r.out;
    EXPECT_EQ(last["gate"], "engine");
    EXPECT_FALSE(fs::exists(merged));
    const std::string candidate = slurp(work / "evo-001/candidate/reports/basic_execution/round-0.txt");
    EXPECT_NE(candidate.find("PASSED L1_stage:basic_execution"), std::string::npos) << candidate;
    const std::string regen = slurp(work / "evo-001/regen/reports/basic_execution/round-0.txt");
    EXPECT_NE(regen.find("verification state: FAILED"), std::string::npos) << regen;
    EXPECT_EQ(regen.find("PASSED L1_stage:basic_execution"), std::string::npos) << regen;
    EXPECT_FALSE(fs::exists(work / "evo-001/regen" / kernel));  // withheld, and the silent implementer wrote nothing
    EXPECT_TRUE(fs::exists(work / "evo-001/regen/src/model.h"));  // a later stage's draft stays: B0 builds it
  }
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("strategy/strategy.md", "The regeneration must write the sources too.\n"), kDone,
        write_step("exploration/notes.md", "Repair RMSNorm in the regeneration too.\n", {{"body_contains", {"seed/failure.md"}}}), kDone,
        write_step("ckb_delta/experience/rmsnorm_mean.md", delta), kDone,
        write_sources, kDone,
        write_sources, kDone,
        {{"respond", {{"text", "No report."}}}},
    })}});
    const auto r = evolve(server, {"--resume", "--max-rounds", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
    EXPECT_EQ(mi_test::last_json_line(r.out)["state"], "ABSORBED") << r.out;
    ASSERT_TRUE(fs::exists(merged));
    EXPECT_NE(slurp(merged).find("evo-002"), std::string::npos) << slurp(merged);
    EXPECT_NE(slurp(work / "evo-002/regen/reports/basic_execution/round-0.txt").find("PASSED L1_stage:basic_execution"), std::string::npos);
    // Before the merge, the regenerated engine also passed the gates that run it from outside (acceptance, L3).
    const json round = json::parse(slurp(work / "evo-002/round.json"));
    EXPECT_EQ(round["regenerate_final_gates"]["passed"], true) << round.dump();
    EXPECT_EQ(round["regenerate_final_gates"]["state"], "PASSED:L0_provenance,PASS_VERIFIED,L3") << round.dump();
  }
}

// Inside evolve, a run directory that is an engine directory is judged by the real engine gate, any other by its
// gate script: decided per run directory.
TEST(Evolve, AnEngineRunDirectoryIsJudgedByTheEngineGate) {
  mi_test::TempDir dir("evolve-gate-choice");
  const fs::path script_dir = dir / "script", engine_dir = dir / "engine";
  write(script_dir / "gates/basic_execution.sh", "exit 0\n");
  write(engine_dir / "MANIFEST.json", "{}");  // unreadable as a manifest: the engine gate must say so, not pass
  write(engine_dir / "tests/stage_basic_execution_test.cpp", "");
  EXPECT_FALSE(mi::agents::is_engine_directory(script_dir, "basic_execution"));
  EXPECT_TRUE(mi::agents::is_engine_directory(engine_dir, "basic_execution"));
  EXPECT_FALSE(mi::agents::is_engine_directory(engine_dir, "model_components"));
  const auto gate = mi::agents::engine_or_script_gate({METAINFER_BINARY, METAINFER_SOURCE_DIR, 60}, 60);
  const auto e = gate(engine_dir, "basic_execution");
  EXPECT_FALSE(e.passed);
  EXPECT_NE(e.evidence.find("not a readable engine directory"), std::string::npos) << e.evidence;
  if (mi::agents::command_isolation().kind != mi::agents::IsolationKind::none) {
    const auto s = gate(script_dir, "basic_execution");
    EXPECT_TRUE(s.passed) << s.evidence;
  }
}

// The process itself is killed (SIGKILL to its process group) while the candidate implementer waits for the
// endpoint, not stopped by an endpoint error: `--resume` continues at the candidate phase of the same round (no second
// strategy, exploration or consolidation), reruns that implementer, and the round is absorbed; the killed
// conversation is still counted.
TEST(Evolve, AKilledProcessResumesAtThePhaseItWasKilledIn) {
  if (mi::agents::command_isolation().kind == mi::agents::IsolationKind::none) GTEST_SKIP() << "gates run isolated; no isolation here";
  mi_test::TempDir dir("evolve-killed");
  const fs::path ckb = dir / "ckb", contracts = dir / "contracts", work = dir / "work";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  write(contracts / "gates/target.sh", "grep -qx 42 src/answer.txt || { echo 'src/answer.txt must hold 42'; exit 1; }\n");
  const std::string model = uncovered_checkpoint(dir.path()).string();
  auto argv = [&](const mi_test::ScriptedLlmServer& server, bool resume) {
    std::vector<std::string> a = {METAINFER_BINARY, "evolve", "--model", model, "--work-dir", work.string(), "--contracts",
                                  contracts.string(), "--ckb", ckb.string(), "--max-repair-rounds", "0", "--max-rounds", "1",
                                  "--llm-url", server.base_url() + "/v1", "--llm-model", "scripted", "--llm-attempts", "1"};
    if (resume) a.push_back("--resume");
    return a;
  };
  {
    mi_test::ScriptedLlmServer server(json{{"steps", json::array({
        write_step("strategy/strategy.md", "Learn the answer.\n"), kDone,
        write_step("exploration/notes.md", "The answer is 42.\n"), kDone,
        write_step("ckb_delta/experience/qwen9_hybrid.md", "The answer is 42.\n"), kDone,
        // The candidate implementer's request: answered only after the process is gone.
        {{"expect", {{"system_contains", "implementation agent"}}}, {"respond", {{"text", "too late"}, {"delay_s", 5}}}},
    })}});
    const int null_fd = ::open("/dev/null", O_RDWR);
    ASSERT_GE(null_fd, 0);
    const auto start = std::chrono::steady_clock::now();
    const int pid = mi::process::spawn(argv(server, false), {}, null_fd, null_fd, null_fd);
    // Wait until the seventh request (the candidate implementer's) has arrived, then kill the whole process group.
    while (server.requests().size() < 7 && std::chrono::steady_clock::now() - start < std::chrono::seconds(240))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(server.requests().size(), 7u) << ::testing::PrintToString(server.failures());
    ::kill(-pid, SIGKILL);
    mi::process::RunResult killed;
    mi::process::reap(pid, killed, start);
    ::close(null_fd);
    EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
    const json round = json::parse(slurp(work / "evo-001/round.json"));
    EXPECT_EQ(round["state"], "IN_PROGRESS");
    EXPECT_EQ(round["phase"], "candidate");
  }
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({
      write_step("src/answer.txt", "42\n", {{"system_contains", "implementation agent"}, {"body_contains", {"round 0"}}}), kDone,
      write_step("src/answer.txt", "42\n", {{"body_contains", {"knowledge base only"}}}), kDone,
      write_step("experiment/summary.md", "Absorbed after a kill.\n", {{"body_contains", {"ABSORBED"}}}), kDone,
  })}});
  const auto r = mi::process::run(argv(server, true), {.timeout_s = 300});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(mi_test::last_json_line(r.out)["state"], "ABSORBED") << r.out;
  EXPECT_TRUE(fs::exists(ckb / "experience/qwen9_hybrid.md"));
  // Strategy, explorer, consolidator, the killed implementer and its rerun; the regeneration; the summariser.
  EXPECT_EQ(json::parse(slurp(work / "metrics.json"))["totals"]["agents_started"], 7) << slurp(work / "metrics.json");
}

}  // namespace
