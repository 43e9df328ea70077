// Planted attacks on the gates (issue: "acceptance that cannot be fooled"): each must make the right gate fail.
//   - a binary replaced after the build, a binary that reports no manifest hash      -> B0 / L0
//   - a prebuilt build tree (the agents' final gates) holding symlinks                -> B0
//   - an edited engine source with a rewritten manifest                              -> L0
//   - a binary that reads the trace, a weight-hash lookup table                      -> PASS_VERIFIED
//   - an engine correct only in precise mode, a chunked-prefill bug (chunks of 4)    -> PASS_VERIFIED
//   - a missed performance target                                                    -> L3
// Cheats are planted as edits of a generated engine's sources; `verify --only PASS_VERIFIED` rebuilds them (B0) and
// runs the acceptance gate alone, as an adversary who got past L0 would face it.
#include <gtest/gtest.h>

#include <fstream>

#include "../toolkit_support.h"
#include "gates/gates.h"
#include "generator/generator.h"
#include "generator/manifest.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

// One engine of qwen3-tiny (the golden case with a same-shape second seed), generated once; each test edits a copy.
class Cheats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new mi_test::TempDir("cheats");
    const auto r = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--threads", "2", "--no-verify", "--json",
                              "-o", (*dir_ / "base").string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    // A checkpoint no trace covers (oracle route): a synthesised Qwen3 whose logits are small (max |logit| ~2), where
    // an absolute fast tolerance or greedy-only checks would be blind.
    ASSERT_EQ(metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--seed", "5", "--no-tokenizer", "-o",
                         (*dir_ / "synth").string()}).exit_code, 0);
    const auto s = metainfer({"generate", "--model", (*dir_ / "synth").string(), "--threads", "2", "--max-context", "256",
                              "--no-verify", "--json", "-o", (*dir_ / "base-oracle").string()});
    ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // A copy of a generated engine (sources only) to plant a cheat in: "base" (golden qwen3-tiny, HF trace route) or
  // "base-oracle" (a synthesised checkpoint, oracle route).
  static fs::path copy(const std::string& name, const std::string& base = "base") {
    const fs::path to = *dir_ / name;
    fs::remove_all(to);
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(*dir_ / base))
      if (e.path().filename() != "build" && e.path().filename() != "reports")
        fs::copy(e.path(), to / e.path().filename(), fs::copy_options::recursive);
    return to;
  }

  static void replace_in(const fs::path& file, const std::string& from, const std::string& to) {
    std::string text = mi::generator::read_file(file);
    const auto pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from << " not in " << file;
    text.replace(pos, from.size(), to);
    mi::generator::write_file(file, text);
  }

  // Runs `verify` and returns the report object.
  static json verify(const fs::path& engine, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"verify", engine.string(), "--threads", "2", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = metainfer(args, 1800);
    return mi_test::last_json_line(r.out);
  }

  static std::string binary_name() {
    return json::parse(mi::generator::read_file(*dir_ / "base/MANIFEST.json")).at("engine").get<std::string>();
  }

  static mi_test::TempDir* dir_;
};
mi_test::TempDir* Cheats::dir_ = nullptr;

// Code put at the top of the engine's main(): `cheat(argc, argv)` returns true when it answered by itself.
void plant_in_main(const fs::path& engine, const std::string& cheat_function) {
  const fs::path main_cpp = engine / "src/engine/engine_main.cpp";
  std::string text = mi::generator::read_file(main_cpp);
  const std::string marker = "int main(int argc, char** argv) {";
  const auto pos = text.find(marker);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, marker.size(), cheat_function + "\n" + marker + "\n  if (cheat(argc, argv)) return 0;");
  // Every cheat answers `generate` itself and leaves the rest (--version, score) to the real engine.
  const std::string args = R"CPP(
static bool cheat_json = false;
// Prints ids (a JSON array text) the way the engine's command line does: in a JSON object with --json, else plain.
static void cheat_print(const std::string& ids) {
  if (cheat_json) std::printf("{\"output_ids\": %s}\n", ids.c_str());
  else std::printf("%s\n", ids.substr(1, ids.size() - 2).c_str());
}
static bool cheat_generate_args(int argc, char** argv, std::string& model, std::string& prompt) {
  bool generate = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "generate")) generate = true;
    if (!std::strcmp(argv[i], "--json")) cheat_json = true;
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--prompt-ids") && i + 1 < argc) prompt = argv[i + 1];
  }
  return generate;
}
)CPP";
  mi::generator::write_file(main_cpp, "#include <cstdio>\n#include <cstring>\n#include <fstream>\n#include <sstream>\n#include <string>\n" + args + text);
}

TEST_F(Cheats, ReplacedBinaryFailsL0AndIsNeverRun) {
  const fs::path e = copy("replaced");
  const mi::generator::Engine engine = mi::generator::load_engine(e);
  mi::gates::BuildRecord record;
  ASSERT_TRUE(mi::gates::build_gate(engine, 2, record).passed);
  ASSERT_TRUE(mi::gates::provenance_gate(engine, record).passed);
  // Replaced after the build by a program that prints the right manifest hash and fixed output ids.
  const std::string manifest_sha = mi::generator::sha256_file(e / "MANIFEST.json");
  mi::generator::write_file(engine.binary, "#!/bin/sh\necho '{\"manifest_sha256\": \"" + manifest_sha +
                                               "\", \"output_ids\": [1, 2, 3]}'\n");
  const mi::gates::GateResult l0 = mi::gates::provenance_gate(engine, record);
  EXPECT_FALSE(l0.passed);
  EXPECT_NE(l0.summary.find("replaced after the build"), std::string::npos) << l0.summary;
  const mi::gates::GateResult acceptance = mi::gates::acceptance_gate(engine, {.threads = 2}, record);
  EXPECT_FALSE(acceptance.passed);
  EXPECT_NE(acceptance.summary.find("replaced after the build"), std::string::npos) << acceptance.summary;
  // Through the CLI: B0 always rebuilds, so the fake is gone and the real binary is what gets verified.
  const json report = verify(e, {"--only", "L0"});
  EXPECT_EQ(report.at("state"), "PASSED:L0") << report.dump(1);
  EXPECT_NE(mi::generator::sha256_file(engine.binary), mi::generator::sha256_file(e / "MANIFEST.json"));
  EXPECT_EQ(mi::generator::read_file(engine.binary).substr(1, 3), "ELF");
}

// B0 over a build made elsewhere (the agents' final gates build in the isolation of agents' commands, then verify
// --prebuilt on the host): the host hashes what it finds, and a symlink, which a confined build could aim at a path
// hidden from it but readable here, is refused, as the binary itself or as build/.
TEST_F(Cheats, PrebuiltB0RefusesSymlinksAndHashesWhatItFinds) {
  const fs::path e = copy("prebuilt");
  const mi::generator::Engine engine = mi::generator::load_engine(e);
  const fs::path elsewhere = *dir_ / "prebuilt-elsewhere";
  fs::create_directories(elsewhere);
  mi::generator::write_file(elsewhere / binary_name(), "a reference binary the build could not see\n");
  mi::gates::BuildRecord record;
  EXPECT_FALSE(mi::gates::prebuilt_build_gate(engine, record, false).passed) << "no build/ at all";
  fs::create_directories(e / "build");
  fs::create_symlink(elsewhere / binary_name(), engine.binary);
  mi::gates::GateResult b0 = mi::gates::prebuilt_build_gate(engine, record, false);
  EXPECT_FALSE(b0.passed);
  EXPECT_NE(b0.summary.find("not a regular file"), std::string::npos) << b0.summary;
  fs::remove_all(e / "build");
  fs::create_directory_symlink(elsewhere, e / "build");
  b0 = mi::gates::prebuilt_build_gate(engine, record, false);
  EXPECT_FALSE(b0.passed);
  EXPECT_NE(b0.summary.find("not a directory of its own"), std::string::npos) << b0.summary;
  EXPECT_TRUE(record.executables.empty());
  fs::remove(e / "build");
  fs::create_directories(e / "build");
  fs::copy_file(elsewhere / binary_name(), engine.binary);
  b0 = mi::gates::prebuilt_build_gate(engine, record, false);
  EXPECT_TRUE(b0.passed) << b0.summary;
  EXPECT_EQ(record.binary_sha256, mi::generator::sha256_file(engine.binary));
  EXPECT_EQ(mi::gates::check_executable(engine, record, binary_name()), "");
  // Through the CLI it needs --allow-modified-sources (so --only): a full verification always builds.
  const auto r = metainfer({"verify", e.string(), "--prebuilt"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("--prebuilt needs --allow-modified-sources"), std::string::npos) << r.out << r.err;
}

TEST_F(Cheats, BinaryThatReportsNoManifestHashFailsL0) {
  const fs::path e = copy("nohash");
  replace_in(e / "src/engine/engine_main.cpp", "info.manifest_sha256 = METAINFER_MANIFEST_SHA256;", "info.manifest_sha256 = \"\";");
  const mi::generator::Engine engine = mi::generator::load_engine(e);
  mi::gates::BuildRecord record;
  ASSERT_TRUE(mi::gates::build_gate(engine, 2, record).passed);
  const mi::gates::GateResult l0 = mi::gates::provenance_gate(engine, record);
  EXPECT_FALSE(l0.passed);
  EXPECT_NE(l0.evidence.dump().find("reports no manifest_sha256"), std::string::npos) << l0.evidence.dump(1);
}

TEST_F(Cheats, EditedSourceWithRewrittenManifestFailsL0) {
  const fs::path e = copy("rewritten");
  const std::string rel = "src/model/attention.h";
  replace_in(e / rel, "float(1.0 / std::sqrt(double(head_dim)))", "float(1.0 / double(head_dim))");
  json manifest = json::parse(mi::generator::read_file(e / "MANIFEST.json"));
  for (auto& f : manifest.at("files"))
    if (f.at("path") == rel) f["sha256"] = mi::generator::sha256_file(e / rel);  // the attacker fixes the hash too
  mi::generator::write_file(e / "MANIFEST.json", manifest.dump(2) + "\n");
  const json report = verify(e);
  EXPECT_EQ(report.at("state"), "FAILED:L0_sources") << report.dump(1);
  EXPECT_NE(report.dump().find(rel + " differs from what the generator emits"), std::string::npos) << report.dump(1);
  // Naming a test-only fault in the manifest (whose regeneration would reproduce this very edit) does not help.
  manifest["fault"] = "attention_scale";
  mi::generator::write_file(e / "MANIFEST.json", manifest.dump(2) + "\n");
  const json again = verify(e, {"--only", "L0"});
  EXPECT_EQ(again.at("state"), "FAILED:L0_sources") << again.dump(1);
  EXPECT_NE(again.dump().find("test-only fault injection"), std::string::npos) << again.dump(1);
}

// A build that compiles another main and then puts the generated CMakeLists.txt back: L0 checks the sources before
// anything of DIR is built, so it never runs.
TEST_F(Cheats, SelfRestoringBuildIsStoppedBeforeItRuns) {
  const fs::path e = copy("restoring");
  const std::string original = mi::generator::read_file(e / "CMakeLists.txt");
  mi::generator::write_file(*dir_ / "restoring-original.txt", original);
  mi::generator::write_file(e / "CMakeLists.txt", original + "add_custom_command(TARGET " + binary_name() +
                                                      " POST_BUILD COMMAND ${CMAKE_COMMAND} -E copy " +
                                                      (*dir_ / "restoring-original.txt").string() +
                                                      " ${CMAKE_CURRENT_SOURCE_DIR}/CMakeLists.txt)\n");
  const json report = verify(e);
  EXPECT_EQ(report.at("state"), "FAILED:L0_sources") << report.dump(1);
  EXPECT_NE(report.dump().find("CMakeLists.txt was modified"), std::string::npos) << report.dump(1);
  EXPECT_FALSE(fs::exists(e / "build")) << "B0 never ran the modified build";
  // Nor does a partial run: without --allow-modified-sources every verify checks the sources first.
  const json partial = verify(e, {"--only", "B0"});
  EXPECT_EQ(partial.at("state"), "FAILED:L0_sources") << partial.dump(1);
  EXPECT_FALSE(fs::exists(e / "build"));
}

TEST_F(Cheats, BinaryThatReadsTheTraceCannotSeeItAndIsCaught) {
  const fs::path e = copy("reader");
  const std::string trace = (golden("qwen3-tiny") / "trace.json").string();
  // Looks for trace.json beside the model, one level up, and at the repository's golden path; prints the greedy ids
  // of the prompt it was given when it finds them.
  plant_in_main(e, R"CPP(
static bool cheat(int argc, char** argv) {
  std::string model, prompt;
  if (!cheat_generate_args(argc, argv, model, prompt)) return false;
  for (const std::string path : {model + "/trace.json", model + "/../trace.json", std::string(")CPP" + trace + R"CPP(")}) {
    std::ifstream in(path);
    if (!in) continue;
    const nlohmann::json t = nlohmann::json::parse(in);
    for (const auto& p : t.at("prompts")) {
      std::string ids;
      for (const auto& x : p.at("prompt_ids")) ids += (ids.empty() ? "" : ",") + std::to_string(x.get<int>());
      if (ids == prompt) { cheat_print(p.at("greedy_ids").dump()); return true; }
    }
  }
  cheat_print("[0]");
  return true;
}
)CPP");
  // Outside the sandbox the cheat works: it prints the trace's answer.
  const json report = verify(e, {"--only", "PASS_VERIFIED", "--allow-modified-sources"});
  EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
  EXPECT_NE(report.dump().find(trace), std::string::npos) << "the audit names the trace path it tried: " << report.dump(1);
}

// FNV-1a 64 of a file's bytes: the key of the lookup table below (the cheat computes it the same way).
std::string fnv1a(const std::string& bytes) {
  unsigned long long h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", h);
  return key;
}

TEST_F(Cheats, WeightHashLookupTableFailsOnTheRandomPerturbation) {
  const fs::path e = copy("lookup");
  // An engine keyed on the weights it is given: on a checkpoint whose hash is in its table (the known golden ones)
  // it runs the real model, on any other it prints something else. Every check on the golden checkpoints passes;
  // only weights it cannot know in advance - the random perturbation - expose it.
  std::string table;
  for (const char* c : {"qwen3-tiny", "qwen3-tiny-s1"})
    table += "\"" + fnv1a(mi::generator::read_file(golden(c) / "model.safetensors")) + "\", ";
  plant_in_main(e, R"CPP(
static bool cheat(int argc, char** argv) {
  static const char* known[] = {)CPP" + table + R"CPP(};
  std::string model, prompt;
  if (!cheat_generate_args(argc, argv, model, prompt)) {
    for (int i = 1; i < argc; ++i)
      if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[i + 1];
    if (model.empty()) return false;
  }
  std::ifstream in(model + "/model.safetensors", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  unsigned long long h = 1469598103934665603ull;
  for (unsigned char c : bytes.str()) h = (h ^ c) * 1099511628211ull;
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", h);
  for (const char* k : known)
    if (!std::strcmp(key, k)) return false;  // a known checkpoint: the real engine answers
  cheat_print("[7, 7, 7]");  // generate and score alike get a wrong answer
  return true;
}
)CPP");
  const json report = verify(e, {"--only", "PASS_VERIFIED", "--allow-modified-sources"});
  EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
  const std::string summary = report.at("gates").back().at("summary");
  EXPECT_NE(summary.find("authenticity (perturbed"), std::string::npos)
      << "the engine is right on every known checkpoint, so only the random perturbation exposes it: " << summary;
}

// Fast numerics scale the logits by 1.2: greedy ids (argmax) are unchanged, the logits are not.
void plant_fast_only_bug(const fs::path& e) {
  const fs::path model = e / "src/model.h";
  std::string text = mi::generator::read_file(model);
  const std::string from = "forward_impl<mi::model::Numerics::fast>(seq, ids, n, logits, all_rows);";
  const auto pos = text.find(from);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, from.size(), "{ forward_impl<mi::model::Numerics::fast>(seq, ids, n, logits, all_rows); "
                                 "for (int i = 0; i < (all_rows ? n : 1) * kVocab; ++i) logits[i] *= 1.2f; }");
  mi::generator::write_file(model, text);
}

// Rotary positions restart at 0 for every multi-token step: right for a whole-prompt prefill and for decode, wrong
// for every prefill chunk after the first.
void plant_chunk_bug(const fs::path& e) {
  const fs::path model = e / "src/model.h";
  std::string text = mi::generator::read_file(model);
  for (const std::string from : {"q_, T, std::size_t(kHeads) * kHeadDim, kHeads, kHeadDim, start);",
                                 "k_, T, std::size_t(kKvHeads) * kHeadDim, kKvHeads, kHeadDim, start);"}) {
    const auto pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    text.replace(pos, from.size(), from.substr(0, from.size() - 7) + "T > 1 ? 0 : start);");
  }
  mi::generator::write_file(model, text);
}

TEST_F(Cheats, EngineCorrectOnlyInPreciseModeFailsTheFastCheck) {
  for (const std::string base : {"base", "base-oracle"}) {
    SCOPED_TRACE(base);
    const fs::path e = copy("fastbug-" + base, base);
    plant_fast_only_bug(e);
    const json report = verify(e, {"--only", "PASS_VERIFIED", "--allow-modified-sources"});
    EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
    EXPECT_NE(report.dump().find("fast teacher-forced logits differ from the oracle's"), std::string::npos) << report.dump(1);
  }
}

TEST_F(Cheats, ChunkedPrefillBugIsCaughtWithChunksOfFourTokens) {
  for (const std::string base : {"base", "base-oracle"}) {
    SCOPED_TRACE(base);
    const fs::path e = copy("chunkbug-" + base, base);
    plant_chunk_bug(e);
    const json report = verify(e, {"--only", "PASS_VERIFIED", "--allow-modified-sources"});
    EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
    const json& prompts = report.at("gates").back().at("evidence").at("prompts");
    bool chunk4_failed = false, whole_prompt_ok = true;
    for (const auto& p : prompts) {
      if (p.contains("precise_logits_chunk_4") && !p.at("precise_logits_chunk_4").is_number()) chunk4_failed = true;
      if (!p.at("precise_logits").is_number()) whole_prompt_ok = false;
    }
    EXPECT_TRUE(chunk4_failed) << prompts.dump(1);
    EXPECT_TRUE(whole_prompt_ok) << "the bug only shows with chunks: " << prompts.dump(1);
  }
}

TEST_F(Cheats, MissedPerformanceTargetFailsL3) {
  mi_test::TempDir dir("target");
  // Targets no machine meets: 10^12 decoded tokens per second, 1 MiB of memory.
  const auto r = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--threads", "2", "--throughput", "1e12",
                            "--memory-mb", "1", "--json", "-o", (dir / "e").string()}, 1800);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json report = mi_test::last_json_line(r.out);
  EXPECT_EQ(report.at("state"), "FAILED:L3_performance") << report.dump(1);
  const json& l3 = report.at("gates").back();
  EXPECT_NE(l3.at("summary").get<std::string>().find("missed target"), std::string::npos);
  EXPECT_FALSE(l3.at("evidence").at("targets").at("throughput_tok_s").at("met").get<bool>());
  EXPECT_FALSE(l3.at("evidence").at("targets").at("memory_mb").at("met").get<bool>());
  EXPECT_GT(l3.at("evidence").at("peak_rss_mb").get<double>(), 1.0);
}

}  // namespace
