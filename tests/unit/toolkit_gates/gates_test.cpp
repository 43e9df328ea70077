// `metainfer generate` / `verify` end to end: every dense golden case reaches PASS_VERIFIED at the AVX-512-BF16 and
// AVX2 levels, and each gate fails when it should (tampered source, planted numerical bug, an engine printing a
// fixed token list, a missing weight). Engines are real: generated, built with CMake from their own tree, run as
// subprocesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

#include "../toolkit_support.h"
#include "generator/manifest.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "platform/cpu_info.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

bool host_runs(const std::string& platform) {
  const auto cpu = mi::platform::detect_cpu();
  if (platform == "x86-64-avx2") return cpu.avx2 && cpu.fma && cpu.f16c;
  if (platform == "x86-64-avx512bf16") return cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq && cpu.avx512_bf16;
  if (platform == "x86-64-amx") return host_runs("x86-64-avx512bf16") && cpu.amx_tile && cpu.amx_bf16;
  return false;
}

json generate(const std::vector<std::string>& extra, int expected_exit, std::string* err = nullptr) {
  std::vector<std::string> args = {"generate", "--json", "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = metainfer(args, 1800);
  EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
  if (err) *err = r.err;
  return mi_test::last_json_line(r.out);
}

// extra: more constraints for the qwen3 cases (the AVX-512-BF16 run makes fast numerics their default, with the bf16
// KV cache, so both KV dtypes and both default numerics are verified across the levels; llama-tiny keeps the
// defaults: with the bf16 cache its p2 fast logits measured 0.467 against a bound of 0.472, too close to judge
// every change by).
void expect_pass_verified(const std::string& platform, const std::vector<std::string>& extra = {}) {
  if (!host_runs(platform)) GTEST_SKIP() << "this CPU cannot run " << platform << "; not verified here";
  mi_test::TempDir dir("gates-" + platform);
  for (const char* c : {"qwen3-tiny", "qwen3-hd128", "llama-tiny"}) {
    SCOPED_TRACE(c);
    std::vector<std::string> args = {"--model", golden(c).string(), "--platform", platform, "-o", (dir / c).string()};
    if (std::string(c).rfind("qwen3", 0) == 0) args.insert(args.end(), extra.begin(), extra.end());
    const json r = generate(args, 0);
    EXPECT_EQ(r.at("state"), "PASS_VERIFIED") << r.dump(1);
    EXPECT_TRUE(fs::exists(r.at("binary").get<std::string>()));
    EXPECT_EQ(fs::path(r.at("engine_dir").get<std::string>()), fs::absolute(dir / c));
    const json report = json::parse(std::ifstream(dir / c / "reports" / "verification.json"));
    std::set<std::string> gates;
    for (const auto& g : report.at("gates")) gates.insert(g.at("id").get<std::string>().substr(0, 8));
    EXPECT_EQ(report.at("gates")[0].at("id"), "L0_sources") << "the sources are checked before anything is built";
    for (const char* g : {"L0_sourc", "B0_build", "L0_prove", "L1_stage", "PASS_VER", "L3_perfo"}) EXPECT_TRUE(gates.count(g)) << g;
    EXPECT_FALSE(gates.count("L2_regre")) << "there is no L2 gate (README)";
    const json& acceptance = report.at("gates")[report.at("gates").size() - 2];
    EXPECT_EQ(acceptance.at("evidence").at("route"), "hf_trace");
    EXPECT_TRUE(acceptance.at("evidence").at("outside_paths").empty());
    EXPECT_TRUE(fs::exists(dir / c / "reports" / "verification.md"));
  }
}

TEST(Gates, DenseGoldenCasesPassVerifiedAtAvx512Bf16) {
  expect_pass_verified("x86-64-avx512bf16", {"--numerics", "fast", "--kv-dtype", "bf16"});
}
TEST(Gates, DenseGoldenCasesPassVerifiedAtAmx) { expect_pass_verified("x86-64-amx"); }
TEST(Gates, DenseGoldenCasesPassVerifiedAtAvx2) { expect_pass_verified("x86-64-avx2"); }

// Issue 11: the hybrid families, assembled from their [[layer_kinds]], reach PASS_VERIFIED. Qwen3.5 ships precise and
// fast numerics (both judged); Qwen3-Next ships precise only (HYBRID-005), and the gate runs --mode fast to check
// that the engine refuses it: an engine that runs a mode the gate does not judge fails (planted below).
void expect_hybrids_pass_verified(const std::string& platform) {
  if (!host_runs(platform)) GTEST_SKIP() << "this CPU cannot run " << platform << "; not verified here";
  mi_test::TempDir dir("hybrid-" + platform);
  for (const char* c : {"qwen3_5-tiny", "qwen3_next-tiny"}) {
    SCOPED_TRACE(c);
    const json r = generate({"--model", golden(c).string(), "--platform", platform, "-o", (dir / c).string()}, 0);
    EXPECT_EQ(r.at("state"), "PASS_VERIFIED") << r.dump(1);
    const json report = json::parse(std::ifstream(dir / c / "reports" / "verification.json"));
    const json* acceptance = nullptr;
    for (const auto& g : report.at("gates"))
      if (g.at("id") == "PASS_VERIFIED") acceptance = &g;
    ASSERT_NE(acceptance, nullptr) << report.dump(1);
    EXPECT_EQ(acceptance->at("evidence").at("route"), "hf_trace");
    const bool moe = std::string(c) == "qwen3_next-tiny";
    EXPECT_EQ(acceptance->at("evidence").contains("worst_fast_logit_diff"), !moe) << acceptance->dump(1);
    if (moe) EXPECT_NE(acceptance->at("evidence").at("fast_mode").get<std::string>().find("HYBRID-005"), std::string::npos);
  }
  // The planted cheat: the MoE engine edited to run --mode fast although its manifest withholds it.
  const fs::path model = dir / "qwen3_next-tiny" / "src" / "model.h";
  std::string text;
  {
    std::ifstream in(model);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  // The refusal `if (options_.fast) mi::fail("--mode fast is not offered by this engine ...")`, however clang-format
  // wrapped it, made dead.
  const std::regex refuse(R"re(if \(options_\.fast\)(\s*mi::fail\(\s*"--mode fast is not offered by this engine))re");
  ASSERT_TRUE(std::regex_search(text, refuse));
  text = std::regex_replace(text, refuse, "if (false)$1");
  mi::generator::write_file(model, text);
  const auto v = metainfer({"verify", (dir / "qwen3_next-tiny").string(), "--only", "PASS_VERIFIED", "--allow-modified-sources", "--json"}, 1800);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const json cheat = mi_test::last_json_line(v.out);
  EXPECT_EQ(cheat.at("state"), "FAILED:PASS_VERIFIED") << cheat.dump(1);
  EXPECT_NE(cheat.dump().find("fast numerics is not shipped, but the engine ran it"), std::string::npos) << cheat.dump(1);
}

TEST(Gates, HybridGoldenCasesPassVerifiedAtAvx2) { expect_hybrids_pass_verified("x86-64-avx2"); }
TEST(Gates, HybridGoldenCasesPassVerifiedAtAvx512Bf16) { expect_hybrids_pass_verified("x86-64-avx512bf16"); }

// Issue 11: a dense family that differs from Qwen3 only in its tensor names is one TOML file
// (tests/data/families/qwen3_renamed.toml, its weights carrying `role`). Added to a copy of the CKB, it lints clean,
// plans covered, and the model generated from it is the qwen3-tiny model (run against its HF trace in
// tests/unit/emitted) with only the tensor names changed.
TEST(Gates, RenamedDenseFamilyIsOneTomlFile) {
  mi_test::TempDir dir("renamed-family");
  const fs::path ckb = dir / "ckb";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  fs::copy_file(fs::path(METAINFER_TEST_DATA) / "families" / "qwen3_renamed.toml", ckb / "families" / "qwen3_renamed.toml");
  ASSERT_EQ(metainfer({"ckb", "check", "--ckb", ckb.string()}).exit_code, 0);

  // The qwen3-tiny checkpoint under the new names and architecture.
  const fs::path model = dir / "model";
  fs::create_directories(model);
  json config = json::parse(std::ifstream(golden("qwen3-tiny") / "config.json"));
  config["architectures"] = {"RenamedQwen3ForCausalLM"};
  config["model_type"] = "qwen3_renamed";
  mi_test::write_text(model / "config.json", config.dump(2));
  auto renamed = [](std::string n) {
    const std::vector<std::pair<std::string, std::string>> map = {
        {"model.embed_tokens.", "decoder.tok_embeddings."}, {"model.norm.", "decoder.final_norm."},
        {"model.layers.", "decoder.blocks."}, {".input_layernorm.", ".attn_norm."},
        {".post_attention_layernorm.", ".ffn_norm."}, {".self_attn.q_proj.", ".attn.wq."},
        {".self_attn.k_proj.", ".attn.wk."}, {".self_attn.v_proj.", ".attn.wv."}, {".self_attn.o_proj.", ".attn.wo."},
        {".self_attn.q_norm.", ".attn.q_norm."}, {".self_attn.k_norm.", ".attn.k_norm."},
        {".mlp.gate_proj.", ".ffn.w1."}, {".mlp.up_proj.", ".ffn.w3."}, {".mlp.down_proj.", ".ffn.w2."}};
    for (const auto& [from, to] : map)
      if (const auto pos = n.find(from); pos != std::string::npos) n.replace(pos, from.size(), to);
    return n;
  };
  const auto store = mi::io::WeightStore::open(golden("qwen3-tiny"));
  std::vector<mi::io::TensorToWrite> tensors;
  for (const auto& n : store.names()) {
    const auto& t = store.get(n);
    tensors.push_back({renamed(n), t.dtype, t.shape, t.data, t.nbytes});
  }
  mi::io::write_safetensors(model / "model.safetensors", tensors);

  const auto plan = metainfer({"plan", "--model", model.string(), "--ckb", ckb.string(), "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  EXPECT_EQ(json::parse(plan.out).at("model").at("family"), "qwen3_renamed");
  // The generated model is the qwen3-tiny one with the tensor names (and the family / architecture labels) replaced:
  // the same steps, dimensions and components, each weight bound to the member of its role. A wrong role (say wq and
  // wk swapped in the TOML) would bind another tensor to a member and differ here.
  auto emit = [&](const fs::path& m, const std::string& ns) {
    const auto r = metainfer({"emit", "--model", m.string(), "--ckb", ckb.string(), "--platform", "x86-64-avx2",
                              "--namespace", ns, "-o", (dir / ns).string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::stringstream text;
    text << std::ifstream(dir / ns / "model.h").rdbuf();
    return text.str();
  };
  std::string original = emit(golden("qwen3-tiny"), "m"), from_toml = emit(model, "m2");
  auto replace_all = [](std::string text, const std::string& from, const std::string& to) {
    for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size())
      text.replace(pos, from.size(), to);
    return text;
  };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"model.embed_tokens.weight\"", "\"decoder.tok_embeddings.weight\""},
           {"model.embed_tokens.weight", "decoder.tok_embeddings.weight"},
           {"model.norm.weight", "decoder.final_norm.weight"}, {"model.layers.", "decoder.blocks."},
           {".input_layernorm.weight", ".attn_norm.weight"}, {".post_attention_layernorm.weight", ".ffn_norm.weight"},
           {".self_attn.q_proj.weight", ".attn.wq.weight"}, {".self_attn.k_proj.weight", ".attn.wk.weight"},
           {".self_attn.v_proj.weight", ".attn.wv.weight"}, {".self_attn.o_proj.weight", ".attn.wo.weight"},
           {".self_attn.q_norm.weight", ".attn.q_norm.weight"}, {".self_attn.k_norm.weight", ".attn.k_norm.weight"},
           {".mlp.gate_proj.weight", ".ffn.w1.weight"}, {".mlp.up_proj.weight", ".ffn.w3.weight"},
           {".mlp.down_proj.weight", ".ffn.w2.weight"}, {"'qwen3'", "'qwen3_renamed'"},
           {"Qwen3ForCausalLM", "RenamedQwen3ForCausalLM"}, {"emitted-qwen3", "emitted-qwen3_renamed"},
           {"namespace m ", "namespace m2 "}, {"namespace m\n", "namespace m2\n"}})
    original = replace_all(original, from, to);
  // clang-format (.clang-format: only whitespace and line breaks change) wraps lines by their length, and the names
  // differ in length: compare with whitespace removed.
  auto tokens_only = [](std::string text) {
    text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
    return text;
  };
  EXPECT_EQ(tokens_only(original), tokens_only(from_toml));
  EXPECT_NE(from_toml.find("\"decoder.blocks.\" + std::to_string(l)"), std::string::npos);
}

TEST(Gates, RegenerationIsByteIdenticalAndTheEngineHoldsOnlyWhatItNeeds) {
  mi_test::TempDir dir("regen");
  for (const char* out : {"a", "b"})
    generate({"--model", golden("llama-tiny").string(), "--platform", "x86-64-avx2", "--no-verify", "-o", (dir / out).string()}, 0);
  const auto files = mi::generator::engine_source_files(dir / "a");
  EXPECT_EQ(files, mi::generator::engine_source_files(dir / "b"));
  for (const auto& f : files) EXPECT_EQ(mi::generator::read_file(dir / "a" / f), mi::generator::read_file(dir / "b" / f)) << f;
  EXPECT_EQ(mi::generator::read_file(dir / "a/MANIFEST.json"), mi::generator::read_file(dir / "b/MANIFEST.json"));
  // Single path: only the avx2 kernel level (plus the scalar oracle), no q/k norm for Llama, dims fixed.
  EXPECT_TRUE(fs::exists(dir / "a/src/kernels/avx2/avx2.cpp"));
  EXPECT_FALSE(fs::exists(dir / "a/src/kernels/avx512bf16"));
  EXPECT_FALSE(fs::exists(dir / "a/src/kernels/avx512"));
  const std::string model = mi::generator::read_file(dir / "a/src/model.h");
  EXPECT_EQ(model.find("q_norm"), std::string::npos);
  EXPECT_EQ(model.find("model_type"), std::string::npos) << "no runtime dispatch on the model family";
  const std::string config = mi::generator::read_file(dir / "a/src/engine_config.h");
  EXPECT_NE(config.find("kHidden = 128;"), std::string::npos);
  EXPECT_NE(config.find("kKernelLevel = \"avx2\""), std::string::npos);
  const json manifest = json::parse(mi::generator::read_file(dir / "a/MANIFEST.json"));
  for (const auto& f : manifest.at("files")) {
    EXPECT_FALSE(f.at("component").get<std::string>().empty()) << f.dump();
    EXPECT_FALSE(f.at("contract").get<std::string>().empty()) << f.dump();
    EXPECT_EQ(f.at("sha256").get<std::string>().size(), 64u);
  }
}

TEST(Gates, TamperedSourceFailsProvenance) {
  mi_test::TempDir dir("tamper");
  const json r = generate({"--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "-o", (dir / "e").string()}, 0);
  ASSERT_EQ(r.at("state"), "PASS_VERIFIED");
  std::ofstream(dir / "e/src/model/rms_norm.h", std::ios::app) << "\n// tampered\n";
  const auto v = metainfer({"verify", (dir / "e").string(), "--json"}, 1800);
  EXPECT_EQ(v.exit_code, 1);
  const json report = mi_test::last_json_line(v.out);
  EXPECT_EQ(report.at("state"), "FAILED:L0_sources") << report.dump(1);
  EXPECT_NE(report.dump().find("src/model/rms_norm.h was modified"), std::string::npos);
  EXPECT_EQ(report.at("gates").size(), 1u) << "nothing of a modified engine is built";
  // An unlisted file is caught too (after restoring the modified one).
  mi::generator::write_file(dir / "e/src/model/rms_norm.h",
                            mi::generator::read_file(fs::path(METAINFER_SOURCE_DIR) / "components/model/rms_norm.h"));
  fs::copy_file(golden("qwen3-tiny") / "config.json", dir / "e/src/extra.json");
  const json again = mi_test::last_json_line(metainfer({"verify", (dir / "e").string(), "--only", "L0", "--json"}, 1800).out);
  EXPECT_EQ(again.at("state"), "FAILED:L0_sources") << again.dump(1);
  EXPECT_NE(again.dump().find("src/extra.json is not in MANIFEST.json"), std::string::npos) << again.dump(1);
}

TEST(Gates, PlantedNumericalBugFailsStageTestsAndPassVerified) {
  mi_test::TempDir dir("planted");
  // A fault-injected engine is never accepted: its manifest names the fault, and L0 stops it first.
  const json r = generate({"--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "--inject-fault",
                           "attention_scale", "-o", (dir / "e").string()}, 1);
  EXPECT_EQ(r.at("state"), "FAILED:L0_sources") << r.dump(1);
  EXPECT_NE(r.dump().find("test-only fault injection"), std::string::npos) << r.dump(1);
  // The later gates catch the bug itself.
  const json l1 = mi_test::last_json_line(metainfer({"verify", (dir / "e").string(), "--only", "L1", "--allow-modified-sources", "--json"}, 1800).out);
  EXPECT_EQ(l1.at("state"), "FAILED:L1_stage:model_components") << l1.dump(1);
  const auto v = metainfer({"verify", (dir / "e").string(), "--only", "PASS_VERIFIED", "--allow-modified-sources", "--json"}, 1800);
  EXPECT_EQ(v.exit_code, 1);
  const json report = mi_test::last_json_line(v.out);
  EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
  EXPECT_NE(report.dump().find("greedy ids differ from the reference"), std::string::npos);
}

TEST(Gates, EngineThatPrintsAFixedTokenListFailsAuthenticity) {
  mi_test::TempDir dir("fixed");
  const std::string trace = (golden("qwen3-tiny") / "trace.json").string();
  const json r = generate({"--model", golden("qwen3-tiny").string(), "--inject-fault", "fixed_output", "--fault-trace", trace,
                           "-o", (dir / "e").string()}, 1);
  EXPECT_EQ(r.at("state"), "FAILED:L0_sources") << r.dump(1);
  // Past L0: it prints the trace's answers for the trace's prompts, and every check that is not the trace itself
  // exposes it (teacher-forced scoring, the perturbed copy, the different-seed checkpoint).
  const json v = mi_test::last_json_line(metainfer({"verify", (dir / "e").string(), "--only", "PASS_VERIFIED", "--allow-modified-sources", "--json"}, 1800).out);
  EXPECT_EQ(v.at("state"), "FAILED:PASS_VERIFIED") << v.dump(1);
  const json& prompts = v.at("gates").back().at("evidence").at("prompts");
  for (const auto& p : prompts)
    if (p.at("prompt") != "long") EXPECT_EQ(p.at("precise"), "identical to the HF trace") << "the fixed ids are the trace's";
  EXPECT_NE(v.at("gates").back().at("summary").get<std::string>().find("precise_logits"), std::string::npos) << v.dump(1);
}

TEST(Gates, MissingWeightIsNamedBeforeAnyCompute) {
  mi_test::TempDir dir("missing");
  // A checkpoint without one tensor.
  mi_test::write_weights_without(golden("qwen3-tiny"), dir / "broken/model.safetensors", "model.layers.1.mlp.up_proj.weight");
  fs::copy_file(golden("qwen3-tiny") / "config.json", dir / "broken/config.json");

  const auto plan = metainfer({"plan", "--model", (dir / "broken").string()});
  EXPECT_EQ(plan.exit_code, 2);
  EXPECT_NE(plan.err.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << plan.err;

  generate({"--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "--no-verify", "-o", (dir / "e").string()}, 0);
  ASSERT_EQ(metainfer({"verify", (dir / "e").string(), "--only", "B0"}, 1800).exit_code, 0);
  const auto engine = dir / "e/build/qwen3-tiny-avx2";
  const auto run = mi::process::run({engine.string(), "generate", "--model", (dir / "broken").string(), "--prompt-ids", "1,2,3", "--json"});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << run.err;
  // The real checkpoint works with the same binary, and the acceptance gate rejects the broken one.
  EXPECT_EQ(mi::process::run({engine.string(), "generate", "--model", golden("qwen3-tiny").string(), "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--json"}).exit_code, 0);
}

TEST(Gates, UncoveredConstraintsExitThreeWithTheGapReport) {
  mi_test::TempDir dir("uncovered");
  // A prefix cache for a hybrid model: no recurrent-state snapshots, so not covered.
  const auto r = metainfer({"generate", "--model", golden("qwen3_5-tiny").string(), "--mode", "serve", "--prefix-cache",
                            "on", "-o", (dir / "e").string(), "--json"});
  EXPECT_EQ(r.exit_code, 3);
  const json j = mi_test::last_json_line(r.out);
  EXPECT_EQ(j.at("state"), "NOT_COVERED");
  EXPECT_FALSE(j.at("plan").at("gaps").empty());
  EXPECT_FALSE(fs::exists(dir / "e"));
}

}  // namespace

namespace {

// A checkpoint with no golden trace (a synthesised one: Llama, f32 weights, tied head) is accepted by running this
// binary on it against the reference oracle: PASS_VERIFIED_ORACLE, the route named in the report.
TEST(Gates, CheckpointWithoutATraceIsVerifiedAgainstTheOracle) {
  mi_test::TempDir dir("oracle-f32");
  ASSERT_EQ(metainfer({"synth-model", "--family", "llama", "--preset", "tiny", "--dtype", "f32", "--seed", "3", "--no-tokenizer",
                       "-o", (dir / "m").string()}).exit_code, 0);
  const json r = generate({"--model", (dir / "m").string(), "--max-context", "256", "-o", (dir / "e").string()}, 0);
  EXPECT_EQ(r.at("state"), "PASS_VERIFIED_ORACLE") << r.dump(1);
  const json& acceptance = r.at("gates")[r.at("gates").size() - 2];
  EXPECT_EQ(acceptance.at("evidence").at("route"), "oracle");
  EXPECT_NE(acceptance.at("evidence").at("fast_mode").get<std::string>().find("not bf16"), std::string::npos);
  const json& prompts = acceptance.at("evidence").at("prompts");
  ASSERT_EQ(prompts.size(), 4u);
  EXPECT_EQ(prompts.back().at("prompt"), "long");
  EXPECT_EQ(prompts.back().at("prompt_tokens").get<int>() + 32, 256) << "the long prompt reaches max_context";
  EXPECT_NE(acceptance.at("evidence").at("authenticity_second_checkpoint").dump().find("fresh random weights"), std::string::npos);
  // L3 sees the engine's memory: every decode step reads the whole (tied, f32) head, so the weights are resident.
  const json& l3 = r.at("gates").back().at("evidence");
  EXPECT_GE(l3.at("peak_rss_mb").get<double>(), l3.at("weights_mb").get<double>()) << l3.dump(1);

  // The random checkpoints come from one reported seed; --draw-seed replays them (the same perturbed tensor and the
  // same fresh weights), so a failure seen once can be investigated.
  const std::string reported = acceptance.at("evidence").at("draw_seed").get<std::string>();
  EXPECT_FALSE(reported.empty());
  auto replay = [&](const std::string& seed) {
    const auto v = metainfer({"verify", (dir / "e").string(), "--only", "PASS_VERIFIED", "--draw-seed", seed, "--json"}, 1800);
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    const json j = mi_test::last_json_line(v.out);
    for (const auto& g : j.at("gates"))
      if (g.at("id") == "PASS_VERIFIED") return g.at("evidence");
    ADD_FAILURE() << j.dump(1);
    return json();
  };
  const json first = replay(reported);
  EXPECT_EQ(first.at("draw_seed"), reported);
  EXPECT_EQ(first.at("authenticity_perturbed"), acceptance.at("evidence").at("authenticity_perturbed"));
  EXPECT_EQ(first.at("authenticity_second_checkpoint"), acceptance.at("evidence").at("authenticity_second_checkpoint"));
  for (const char* s : {"12x", " -1", "", "+5", "18446744073709551616"}) {
    const auto bad = metainfer({"verify", (dir / "e").string(), "--only", "PASS_VERIFIED", "--draw-seed", s});
    EXPECT_EQ(bad.exit_code, 2) << s;
    EXPECT_NE(bad.err.find(std::string("--draw-seed: expected an unsigned 64-bit decimal integer, got '") + s + "'"), std::string::npos) << bad.err;
  }
  // A known seed means known authenticity checkpoints: a replay is never a full verification (no PASS_VERIFIED).
  const auto full = metainfer({"verify", (dir / "e").string(), "--draw-seed", reported});
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_NE(full.err.find("--draw-seed needs --only GATE"), std::string::npos) << full.err;
}

// Untied head and Llama-3 rope scaling, bf16 (fast mode shipped): the golden llama-tiny weights under a config
// with rope scaling are no golden case any more, so the oracle judges them.
TEST(Gates, RopeScalingUntiedHeadVerifiedAgainstTheOracleInEveryMode) {
  mi_test::TempDir dir("oracle-rope");
  fs::create_directories(dir / "m");
  fs::copy_file(golden("llama-tiny") / "model.safetensors", dir / "m/model.safetensors");
  json config = json::parse(mi::generator::read_file(golden("llama-tiny") / "config.json"));
  ASSERT_FALSE(config.value("tie_word_embeddings", true));
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 64}};
  mi::generator::write_file(dir / "m/config.json", config.dump(2));
  const json r = generate({"--model", (dir / "m").string(), "--max-context", "256", "--numerics", "fast", "-o", (dir / "e").string()}, 0);
  EXPECT_EQ(r.at("state"), "PASS_VERIFIED_ORACLE") << r.dump(1);
  const json& acceptance = r.at("gates")[r.at("gates").size() - 2];
  for (const auto& p : acceptance.at("evidence").at("prompts")) {
    if (p.at("prompt") == "long") {  // beyond the fast bound's calibration: measured, not judged
      EXPECT_TRUE(p.at("fast_logits_measured_not_judged").is_number()) << p.dump();
      EXPECT_TRUE(p.at("precise_logits_chunk_4").is_number()) << p.dump();
      continue;
    }
    EXPECT_TRUE(p.at("fast_logits").is_number()) << p.dump();
    EXPECT_TRUE(p.at("fast_logits_chunk_4").is_number()) << p.dump();
    EXPECT_EQ(p.at("fast_greedy").get<std::string>().substr(0, 2), "ok") << p.dump();
  }
}

// An engine generated for a short context runs the golden prompts that fit it (p2 needs 182 tokens).
TEST(Gates, ShortContextEngineVerifiesThePromptsThatFit) {
  mi_test::TempDir dir("short");
  const json r = generate({"--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2", "--max-context", "64",
                           "-o", (dir / "e").string()}, 0);
  EXPECT_EQ(r.at("state"), "PASS_VERIFIED") << r.dump(1);
  const json& acceptance = r.at("gates")[r.at("gates").size() - 2];
  EXPECT_EQ(acceptance.at("evidence").at("skipped_prompts_beyond_max_context"), json::array({"p2"})) << acceptance.dump(1);
}

}  // namespace
