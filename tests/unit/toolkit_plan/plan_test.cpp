// `metainfer plan` and coverage detection on covered and uncovered checkpoints, and the constraints file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "constraints/constraints.h"
#include "coverage/coverage.h"
#include "gates/gates.h"
#include "generator/generator.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "platform/cpu_info.h"

namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

std::set<std::string> gap_ids(const json& plan) {
  std::set<std::string> ids;
  for (const auto& g : plan.at("gaps")) ids.insert(g.at("id").get<std::string>());
  return ids;
}

TEST(Plan, DenseGoldenCheckpointsAreFullyCovered) {
  for (const char* c : {"qwen3-tiny", "qwen3-hd128", "llama-tiny", "qwen3-tiny-s1"}) {
    const auto r = metainfer({"plan", "--model", golden(c).string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << c << ": " << r.out << r.err;
    const json plan = json::parse(r.out);
    EXPECT_EQ(plan.at("format"), "metainfer-plan/1");
    EXPECT_TRUE(plan.at("covered").get<bool>()) << c;
    EXPECT_TRUE(plan.at("gaps").empty()) << c;
    EXPECT_FALSE(plan.at("model").at("tokenizer").get<bool>());
    bool noted = false;
    for (const auto& n : plan.at("notes")) noted = noted || n.get<std::string>().find("token ids only") != std::string::npos;
    EXPECT_TRUE(noted) << "the report must say the engine works on token ids only";
    std::set<std::string> contracts;
    for (const auto& r : plan.at("requirements")) {
      EXPECT_TRUE(r.at("covered").get<bool>()) << r.dump();
      contracts.insert(r.at("contract"));
    }
    for (const char* needed : {"embedding", "rmsnorm", "rotary_embedding", "gqa_attention", "swiglu_mlp", "lm_head",
                               "kv_cache", "sampler", "engine_cli", "weight_loading"})
      EXPECT_TRUE(contracts.count(needed)) << c << " lacks " << needed;
    // Offline, one request at a time, chat not asked for: neither the scheduler nor the chat template interpreter.
    for (const char* unneeded : {"scheduler", "chat_template", "server"})
      EXPECT_FALSE(contracts.count(unneeded)) << c << " requires " << unneeded << " though its constraints do not ask for it";
  }
  const auto qwen = json::parse(metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--json"}).out);
  EXPECT_EQ(qwen.at("model").at("family"), "qwen3");
  const auto llama = json::parse(metainfer({"plan", "--model", golden("llama-tiny").string(), "--json"}).out);
  EXPECT_EQ(llama.at("model").at("family"), "llama");
}

std::set<std::string> required_contracts(const json& plan) {
  std::set<std::string> out;
  for (const auto& r : plan.at("requirements")) out.insert(r.at("contract").get<std::string>());
  return out;
}

// What goes into an engine follows the constraints: chat (runtime.chat, on by default only for serve) brings the chat
// template interpreter, serve brings the scheduler and the server, the prefix cache (serve only) brings
// runtime/prefix_cache; the files of what is not asked for are not in the generated tree at all, and MANIFEST.json
// counts the engine's lines against the component library's.
// A hybrid model (Gated DeltaNet layers with a recurrent state): its batched steps and their scratch (the per-row
// state pointers) are emitted only for max_batch >= 2 too.
TEST(Plan, HybridEngineCarriesTheBatchedPathOnlyForMaxBatchAboveOne) {
  mi_test::TempDir dir("plan-hybrid-batch");
  for (const int max_batch : {1, 2}) {
    SCOPED_TRACE(max_batch);
    const std::filesystem::path out = dir.path() / ("b" + std::to_string(max_batch));
    const auto g = metainfer({"generate", "--model", golden("qwen3_5-tiny").string(), "--platform", "x86-64-avx2",
                              "--max-batch", std::to_string(max_batch), "--no-verify", "-o", out.string()});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const std::string model_h = slurp(out / "src" / "model.h");
    for (const char* batched_text : {"void forward_batch(", "state_ptrs_", "gated_delta_rule_decode_batch", "batch_positions_"})
      EXPECT_EQ(model_h.find(batched_text) != std::string::npos, max_batch > 1) << batched_text;
    EXPECT_NE(model_h.find("gated_delta_rule"), std::string::npos);  // the one-sequence path is there either way
  }
}

TEST(Plan, EngineHoldsOnlyWhatItsConstraintsAskFor) {
  const std::string model = golden("qwen3-tiny").string();
  struct Case {
    std::vector<std::string> flags;
    bool chat, scheduler, server, prefix_cache, batched;
  };
  const std::vector<Case> cases = {{{}, false, false, false, false, false},
                                   {{"--chat", "on"}, true, false, false, false, false},
                                   {{"--mode", "bench"}, false, false, false, false, false},
                                   {{"--mode", "serve", "--max-batch", "4"}, true, true, true, false, true},
                                   {{"--mode", "serve", "--max-batch", "4", "--prefix-cache", "on"}, true, true, true, true, true},
                                   {{"--mode", "serve"}, true, true, true, false, false},
                                   {{"--max-batch", "2"}, false, false, false, false, true}};
  mi_test::TempDir dir("plan-features");
  int i = 0;
  std::vector<std::pair<int, int>> lines;  // per case: engine source lines, of which chat interpreter lines
  std::vector<std::set<std::string>> trees;  // per case: the engine's files
  int prefix_cache_lines = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.flags));
    std::vector<std::string> args{"plan", "--model", model, "--platform", "x86-64-avx2", "--json"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const auto r = metainfer(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json plan = json::parse(r.out);
    EXPECT_EQ(plan.at("chat").get<bool>(), c.chat);
    EXPECT_EQ(plan.at("constraints").at("chat").get<bool>(), c.chat);
    const std::set<std::string> contracts = required_contracts(plan);
    EXPECT_EQ(contracts.count("chat_template"), c.chat ? 1u : 0u);
    EXPECT_EQ(contracts.count("scheduler"), c.scheduler ? 1u : 0u);
    EXPECT_EQ(contracts.count("server"), c.server ? 1u : 0u);
    EXPECT_EQ(contracts.count("prefix_cache"), c.prefix_cache ? 1u : 0u);

    const std::filesystem::path out = dir.path() / ("e" + std::to_string(i++));
    std::vector<std::string> gen{"generate", "--model", model, "--platform", "x86-64-avx2", "--no-verify", "-o", out.string()};
    gen.insert(gen.end(), c.flags.begin(), c.flags.end());
    const auto g = metainfer(gen);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const json manifest = json::parse(slurp(out / "MANIFEST.json"));
    bool chat_files = false, chat_commands = false, scheduler = false, server = false, prefix_cache = false;
    std::set<std::string> tree;
    for (const auto& f : manifest.at("files")) {
      const std::string path = f.at("path");
      tree.insert(path);
      chat_files = chat_files || path.rfind("src/chat/", 0) == 0;
      chat_commands = chat_commands || path == "src/engine/chat_commands.h";
      scheduler = scheduler || path.rfind("src/runtime/scheduler", 0) == 0;
      server = server || path.rfind("src/server/", 0) == 0;
      if (path.rfind("src/runtime/prefix_cache", 0) == 0) {
        prefix_cache = true;
        EXPECT_EQ(f.at("contract"), "prefix_cache") << path;
        if (c.prefix_cache) prefix_cache_lines += f.at("lines").get<int>();
      }
    }
    EXPECT_EQ(chat_files, c.chat);
    EXPECT_EQ(chat_commands, c.chat);
    EXPECT_EQ(scheduler, c.scheduler);
    EXPECT_EQ(server, c.server);
    EXPECT_EQ(prefix_cache, c.prefix_cache);
    // The tree itself, not only the manifest: no prefix-cache source where the constraints leave it off.
    EXPECT_EQ(std::filesystem::exists(out / "src/runtime/prefix_cache.h"), c.prefix_cache);
    EXPECT_EQ(std::filesystem::exists(out / "src/runtime/prefix_cache.cpp"), c.prefix_cache);
    EXPECT_EQ(slurp(out / "CMakeLists.txt").find("src/runtime/prefix_cache.cpp") != std::string::npos, c.prefix_cache);
    const std::string features = slurp(out / "src" / "engine_features.h");
    EXPECT_NE(features.find(c.chat ? "using ChatCommands = mi::engine::ChatTemplateCommands;"
                                   : "using ChatCommands = mi::engine::NoChat;"), std::string::npos) << features;
    // The serving loop's prefix reuse is a type chosen here at build time, not a run-time switch.
    if (c.server)
      EXPECT_NE(features.find(c.prefix_cache ? "using PrefixReuse = mi::runtime::PrefixCache;"
                                             : "using PrefixReuse = mi::server::NoPrefixCache;"), std::string::npos) << features;
    else
      EXPECT_EQ(features.find("PrefixReuse"), std::string::npos) << features;
    EXPECT_EQ(features.find("runtime/prefix_cache.h") != std::string::npos, c.prefix_cache) << features;
    EXPECT_EQ(slurp(out / "src" / "engine_config.h").find("PrefixCache"), std::string::npos);
    // The batched decode path (forward_batch, the layers' *Batch steps, their scratch) only for max_batch >= 2.
    const std::string model_h = slurp(out / "src" / "model.h");
    for (const char* batched_text : {"void forward_batch(", "void forward_batch_impl(", "Batch(const LayerWeights& w",
                                     "batch_positions_", "static_assert(mi::engine::BatchedEngineModel<Model>);"})
      EXPECT_EQ(model_h.find(batched_text) != std::string::npos, c.batched) << batched_text;
    const int engine_lines = manifest.at("lines").at("engine_sources").get<int>();
    const int library_lines = manifest.at("lines").at("component_library").get<int>();
    EXPECT_GT(engine_lines, 0);
    EXPECT_LT(engine_lines, library_lines);
    int chat_lines = 0;
    for (const auto& f : manifest.at("files"))
      if (f.at("path").get<std::string>().rfind("src/chat/", 0) == 0) chat_lines += f.at("lines").get<int>();
    lines.push_back({engine_lines, chat_lines});
    trees.push_back(tree);
  }
  // The chat engine is the offline engine plus the interpreter (and the chat commands on top).
  EXPECT_GT(lines[1].second, 3000) << "the chat template interpreter";
  EXPECT_GE(lines[1].first, lines[0].first + lines[1].second);
  EXPECT_EQ(lines[2].first, lines[0].first) << "bench mode adds nothing: every engine carries ENGINE bench";
  // The prefix cache is the serve engine plus runtime/prefix_cache.{h,cpp}: nothing else is added or taken away.
  std::set<std::string> added, removed;
  std::set_difference(trees[4].begin(), trees[4].end(), trees[3].begin(), trees[3].end(), std::inserter(added, added.end()));
  std::set_difference(trees[3].begin(), trees[3].end(), trees[4].begin(), trees[4].end(), std::inserter(removed, removed.end()));
  EXPECT_EQ(added, (std::set<std::string>{"src/runtime/prefix_cache.cpp", "src/runtime/prefix_cache.h"}));
  EXPECT_TRUE(removed.empty()) << ::testing::PrintToString(removed);
  EXPECT_GT(prefix_cache_lines, 100);
  EXPECT_GE(lines[4].first, lines[3].first + prefix_cache_lines);
  // Regenerated from their manifests' constraints, the chat engine and the prefix-cache engine are the same trees
  // (L0 sees runtime.chat and runtime.prefix_cache).
  for (const char* e : {"e1", "e4"}) {
    const mi::gates::GateResult l0 = mi::gates::sources_gate(mi::generator::load_engine(dir.path() / e));
    EXPECT_TRUE(l0.passed) << e << ": " << l0.summary << l0.evidence.dump();
  }
}

// A user who builds an engine with symbols (RelWithDebInfo: -O2 -g) still gets -O3 kernels: at -O2 GCC 12 kept the
// decode kernels' accumulators in memory (decode 2.4-4x slower). Debug stays unoptimised; nothing else is changed.
TEST(Plan, EngineKernelsAreCompiledAtO3InEveryBuildTypeButDebug) {
  mi_test::TempDir dir("plan-opt");
  const std::filesystem::path out = dir.path() / "e";
  const auto g = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                            "--no-verify", "-o", out.string()});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  // The compile command of each engine source, as CMake writes it for a build type (configure only, nothing built).
  auto commands = [&](const std::string& build_type) {
    const std::filesystem::path build = dir.path() / ("build-" + build_type);
    const auto conf = mi::process::run({"cmake", "-S", out.string(), "-B", build.string(), "-G", "Ninja",
                                        "-DCMAKE_BUILD_TYPE=" + build_type, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"},
                                       // the build types' own flags only, whatever CXXFLAGS the caller has
                                       {.env = {{"CXXFLAGS", ""}}, .timeout_s = 300, .merge_stderr = true});
    EXPECT_EQ(conf.exit_code, 0) << mi::process::tail(conf.out);
    std::map<std::string, std::string> by_source;  // engine-relative source -> command
    for (const auto& c : json::parse(slurp(build / "compile_commands.json"))) {
      const std::string file = std::filesystem::relative(c.at("file").get<std::string>(), out).string();
      by_source[file] = c.at("command").get<std::string>();
    }
    return by_source;
  };
  // Position of the last optimisation flag in a command ("-O2", "-O3", ...), or "" when there is none.
  auto last_opt = [](const std::string& command) {
    std::istringstream words(command);
    std::string w, last;
    while (words >> w)
      if (w.size() == 3 && w.rfind("-O", 0) == 0) last = w;
    return last;
  };
  const auto rel = commands("RelWithDebInfo");
  ASSERT_TRUE(rel.count("src/kernels/avx2/avx2.cpp")) << "the avx2 engine compiles its kernel level";
  int kernel_files = 0;
  for (const auto& [file, command] : rel) {
    const bool kernel = file.rfind("src/kernels/", 0) == 0;
    kernel_files += kernel;
    EXPECT_EQ(last_opt(command), kernel ? "-O3" : "-O2") << file << ": " << command;
  }
  EXPECT_GE(kernel_files, 2);
  for (const auto& [file, command] : commands("Debug")) EXPECT_EQ(last_opt(command), "") << file << ": " << command;
  for (const auto& [file, command] : commands("Release")) EXPECT_EQ(last_opt(command), "-O3") << file << ": " << command;
}

TEST(Plan, ChatOffIsRefusedForServeAndExplained) {
  const auto r = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--mode", "serve", "--chat", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("runtime.chat"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/v1/chat/completions"), std::string::npos) << r.err;
  const auto bad = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--chat", "maybe"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--chat"), std::string::npos) << bad.err;
}

const json* find_gap(const json& plan, const std::string& id) {
  for (const auto& g : plan.at("gaps"))
    if (g.at("id") == id) return &g;
  return nullptr;
}

// The hybrid families (ckb/families/qwen3_5.toml, qwen3_next.toml) are covered: every step of every layer kind they
// use has an entry in the generator's step table, and their features ((1+w) norms, interleaved M-RoPE on text
// positions, partial rotary, gated attention, Gated DeltaNet, MoE) have implemented contracts the family requires.
TEST(Plan, Qwen35IsCovered) {
  const auto r = metainfer({"plan", "--model", golden("qwen3_5-tiny").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_TRUE(plan.at("covered").get<bool>());
  EXPECT_EQ(plan.at("model").at("family"), "qwen3_5");
  EXPECT_TRUE(plan.at("gaps").empty()) << plan.at("gaps").dump(1);
  std::set<std::string> contracts;
  for (const auto& req : plan.at("requirements")) {
    EXPECT_TRUE(req.at("covered").get<bool>()) << req.dump();
    contracts.insert(req.at("contract"));
  }
  for (const char* needed : {"gated_delta_rule", "conv1d_state", "rms_norm_gated", "recurrent_state", "gated_attention",
                             "swiglu_mlp", "rmsnorm_one_plus_w", "rotary_embedding_mrope"})
    EXPECT_TRUE(contracts.count(needed)) << needed;
  EXPECT_TRUE(plan.at("platform").at("fast_numerics").get<bool>());
  // What fast numerics keeps f32 in this family (NUM-FAST-002), said in the plan.
  EXPECT_EQ(plan.at("platform").at("fast_f32_inputs"), nlohmann::json({"swiglu_mlp"}));
}

// HYBRID-003: a layer-kind step the generator's step table lacks is a gap naming the kind and its layers (planted:
// a CKB copy whose gated_deltanet kind names a step no emitter exists for).
TEST(Plan, LayerKindStepWithoutEmitterIsAGap) {
  mi_test::TempDir dir("plan-kind-gap");
  const std::filesystem::path ckb = dir / "ckb";
  std::filesystem::copy(mi::ckb::default_ckb_dir(), ckb, std::filesystem::copy_options::recursive);
  std::ifstream in(ckb / "families" / "qwen3_5.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string family = text.str();
  const std::string from = "\"gated_delta_rule\",\n           \"rms_norm_gated\"";
  ASSERT_NE(family.find(from), std::string::npos);
  family.replace(family.find(from), from.size(), "\"gated_delta_rule_v2\",\n           \"rms_norm_gated\"");
  mi_test::write_text(ckb / "families" / "qwen3_5.toml", family);
  const auto r = metainfer({"plan", "--model", golden("qwen3_5-tiny").string(), "--ckb", ckb.string(), "--json"});
  ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
  const json plan = json::parse(r.out);
  const json* gdn = find_gap(plan, "gated_deltanet");
  ASSERT_NE(gdn, nullptr) << plan.at("gaps").dump(1);
  EXPECT_EQ(gdn->at("kind"), "layer_kind");
  EXPECT_NE(gdn->at("what").get<std::string>().find("the generator has no emitter for layer kind gated_deltanet"),
            std::string::npos) << gdn->dump();
  EXPECT_NE(gdn->at("what").get<std::string>().find("layers 0,1,2"), std::string::npos) << gdn->dump();
  EXPECT_NE(gdn->at("what").get<std::string>().find("gated_delta_rule_v2"), std::string::npos) << gdn->dump();
}

// Qwen3-Next is covered; fast numerics is withheld (HYBRID-005: MoE routing flips under bf16 activations), so asking
// for it is a clear error, and a prefix cache is a gap (no recurrent-state snapshots).
TEST(Plan, Qwen3NextIsCoveredWithoutFastNumerics) {
  const auto r = metainfer({"plan", "--model", golden("qwen3_next-tiny").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan.at("model").at("family"), "qwen3_next");
  EXPECT_TRUE(plan.at("gaps").empty()) << plan.at("gaps").dump(1);
  EXPECT_FALSE(plan.at("platform").at("fast_numerics").get<bool>());
  EXPECT_TRUE(plan.at("platform").at("fast_f32_inputs").empty());
  EXPECT_NE(plan.at("platform").at("fast_numerics_withheld").get<std::string>().find("HYBRID-005"), std::string::npos);
  const auto fast = metainfer({"plan", "--model", golden("qwen3_next-tiny").string(), "--numerics", "fast"});
  EXPECT_EQ(fast.exit_code, 2) << fast.out << fast.err;
  EXPECT_NE(fast.err.find("runtime.numerics"), std::string::npos) << fast.err;
  EXPECT_NE(fast.err.find("mixture-of-experts routing"), std::string::npos) << fast.err;
  const auto prefix = metainfer({"plan", "--model", golden("qwen3_next-tiny").string(), "--mode", "serve",
                                 "--prefix-cache", "on", "--json"});
  EXPECT_EQ(prefix.exit_code, 3) << prefix.out << prefix.err;
  EXPECT_NE(find_gap(json::parse(prefix.out), "prefix_cache"), nullptr) << prefix.out;
}

// Failure mode ENGINE-001: an architecture no family lists is a named gap, with the features the signals recognise
// and every weight pattern no family maps (here: the qwen3_5-tiny checkpoint under an unknown name).
TEST(Plan, UnknownArchitectureIsANamedGap) {
  mi_test::TempDir dir("unknown-arch");
  std::filesystem::copy_file(golden("qwen3_5-tiny") / "model.safetensors", dir / "model.safetensors");
  std::ifstream in(golden("qwen3_5-tiny") / "config.json");
  json config = json::parse(in);
  config["architectures"] = {"Qwen9HybridForCausalLM"};
  mi_test::write_text(dir / "config.json", config.dump(2));
  const auto r = metainfer({"plan", "--model", dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_TRUE(plan.at("model").at("family").is_null());
  const auto ids = gap_ids(plan);
  for (const char* g : {"Qwen9HybridForCausalLM", "gated_deltanet", "gated_attention",
                        "partial_rotary", "interleaved_mrope", "rmsnorm_one_plus_w"})
    EXPECT_TRUE(ids.count(g)) << "missing gap " << g << " in " << plan.at("gaps").dump(1);
  EXPECT_FALSE(ids.count("mixture_of_experts"));
}

// Failure modes ENGINE-001 / CONFIG-001 for the multimodal wrapper: Qwen3_5ForConditionalGeneration routes to family
// qwen3_5 (config in text_config, the text tower under model.language_model.*, the vision tower not the family's),
// covered as the text-only checkpoint is (no gaps) and no unmapped weight.
TEST(Plan, Qwen35ConditionalGenerationRoutesToTheTextFamily) {
  mi_test::TempDir dir("qwen3_5-vl");
  std::ifstream in(golden("qwen3_5-tiny") / "config.json");
  json text = json::parse(in);
  text.erase("architectures");
  const json root = {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"model_type", "qwen3_5"},
                     {"tie_word_embeddings", false}, {"text_config", text}};
  mi_test::write_text(dir / "config.json", root.dump(2));
  const auto store = mi::io::WeightStore::open(golden("qwen3_5-tiny"));
  std::vector<mi::io::TensorToWrite> tensors;
  for (const auto& n : store.names()) {
    const auto& t = store.get(n);
    tensors.push_back({n.starts_with("model.") ? "model.language_model." + n.substr(6) : n, t.dtype, t.shape, t.data,
                       t.nbytes});
  }
  const auto& any = store.get("model.norm.weight");
  tensors.push_back({"model.visual.merger.norm.weight", any.dtype, any.shape, any.data, any.nbytes});
  mi::io::write_safetensors(dir / "model.safetensors", tensors);
  const auto r = metainfer({"plan", "--model", dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan.at("model").at("family"), "qwen3_5");
  EXPECT_EQ(plan.at("model").at("config_source"), "config.json: text_config");
  const auto direct = gap_ids(json::parse(metainfer({"plan", "--model", golden("qwen3_5-tiny").string(), "--json"}).out));
  EXPECT_EQ(gap_ids(plan), direct) << plan.at("gaps").dump(1);
  // A missing text-tower tensor is named under its stored name.
  mi_test::write_weights_without(dir.path(), dir / "m2" / "model.safetensors",
                                 "model.language_model.layers.0.linear_attn.A_log");
  std::filesystem::copy_file(dir / "config.json", dir / "m2" / "config.json");
  const auto missing = metainfer({"plan", "--model", (dir / "m2").string(), "--json"});
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("missing tensor model.language_model.layers.0.linear_attn.A_log"), std::string::npos)
      << missing.err;
}

// Failure mode CONFIG-001: a config whose text model sits in text_config is read through it.
TEST(Plan, NestedTextConfigIsCovered) {
  mi_test::TempDir dir("nested");
  std::filesystem::copy_file(golden("qwen3-tiny") / "model.safetensors", dir / "model.safetensors");
  std::ifstream in(golden("qwen3-tiny") / "config.json");
  json text = json::parse(in);
  json root = {{"architectures", text["architectures"]}, {"model_type", "qwen3_wrapper"}, {"text_config", text}};
  root["text_config"].erase("architectures");
  mi_test::write_text(dir / "config.json", root.dump(2));
  const auto r = metainfer({"plan", "--model", dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan.at("model").at("config_source"), "config.json: text_config");
  EXPECT_EQ(plan.at("model").at("dims").at("hidden_size"), 128);
}

TEST(Plan, UnsupportedOptionsAreGapsNotErrors) {
  const auto tp = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--tp", "2", "--json"});
  EXPECT_EQ(tp.exit_code, 3);
  EXPECT_TRUE(gap_ids(json::parse(tp.out)).count("tensor_parallel"));
  const auto prefix = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--prefix-cache", "on", "--json"});
  EXPECT_EQ(prefix.exit_code, 3);
  EXPECT_TRUE(gap_ids(json::parse(prefix.out)).count("prefix_cache"));
  const auto conv = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--dtype", "f32", "--json"});
  EXPECT_EQ(conv.exit_code, 3);
  EXPECT_TRUE(gap_ids(json::parse(conv.out)).count("dtype_conversion"));
}

// runtime.mode = "serve" is covered: the plan requires the server contract, and with it the prefix cache's.
TEST(Plan, ServeModeIsPlannedWithTheServerContract) {
  const auto r = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--mode", "serve", "--max-batch", "4",
                            "--prefix-cache", "on", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  const std::set<std::string> contracts = required_contracts(plan);
  EXPECT_TRUE(contracts.count("server")) << plan.dump(2);
  EXPECT_TRUE(contracts.count("prefix_cache")) << plan.dump(2);
}

// platform.dtype = "int8" is covered: the plan requires the int8_weights contract (no dtype_conversion gap).
TEST(Plan, Int8WeightsArePlannedWithTheirContract) {
  const auto r = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--dtype", "int8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_TRUE(gap_ids(plan).empty()) << plan.dump(1);
  EXPECT_NE(plan.dump().find("\"int8_weights\""), std::string::npos) << plan.dump(1);
  EXPECT_NE(plan.dump().find("components/model/int8_weights.h"), std::string::npos) << plan.dump(1);
}

// A copy of golden qwen3_next-tiny (weights linked) whose config.json is `edit`ed.
std::filesystem::path edited_next_tiny(const mi_test::TempDir& dir, const std::string& name,
                                       const std::function<void(json&)>& edit) {
  const std::filesystem::path out = dir.path() / name;
  std::filesystem::create_directories(out);
  json cfg = json::parse(slurp(golden("qwen3_next-tiny") / "config.json"));
  edit(cfg);
  std::ofstream(out / "config.json") << cfg.dump(2);
  std::filesystem::create_symlink(golden("qwen3_next-tiny") / "model.safetensors", out / "model.safetensors");
  return out;
}

// transformers builds layer_types from full_attention_interval when a Qwen3-Next / Qwen3.5 config omits it
// ((i + 1) % interval == 0 -> full attention): coverage, the generator and the oracle do the same.
TEST(Plan, HybridLayerPatternFollowsFullAttentionIntervalWithoutLayerTypes) {
  mi_test::TempDir dir("layer-interval");
  const auto derived = edited_next_tiny(dir, "derived", [](json& c) {
    c.erase("layer_types");
    c["full_attention_interval"] = 4;
  });
  ASSERT_EQ(metainfer({"plan", "--model", derived.string()}).exit_code, 0);
  auto emit = [&](const std::filesystem::path& model, const std::string& out) {
    const auto r = metainfer({"emit", "--model", model.string(), "--platform", "x86-64-avx2", "-o", (dir.path() / out).string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return slurp(dir.path() / out / "model.h");
  };
  EXPECT_EQ(emit(derived, "e-derived"), emit(golden("qwen3_next-tiny"), "e-given"));
  const json trace = json::parse(slurp(golden("qwen3_next-tiny") / "trace.json"));
  const auto& p0 = trace.at("prompts").at(0);
  std::string ids;
  for (const auto& id : p0.at("prompt_ids")) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  const auto oracle = metainfer({"oracle", "--model", derived.string(), "--prompt-ids", ids, "--max-new-tokens", "4", "--json"});
  ASSERT_EQ(oracle.exit_code, 0) << oracle.err;
  const std::vector<int> greedy = p0.at("greedy_ids").get<std::vector<int>>();
  EXPECT_EQ(mi_test::last_json_line(oracle.out).at("output_ids").get<std::vector<int>>(),
            std::vector<int>(greedy.begin(), greedy.begin() + 4));
  // Interval 2: layers 1 and 3 are full attention, so these weights (linear attention at layer 1) no longer fit and
  // the report names the attention tensors layer 1 now needs.
  const auto every_other = edited_next_tiny(dir, "every-other", [](json& c) {
    c.erase("layer_types");
    c["full_attention_interval"] = 2;
  });
  const auto mismatch = metainfer({"plan", "--model", every_other.string()});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.err.find("missing tensor model.layers.1.self_attn.q_proj.weight"), std::string::npos) << mismatch.err;
  EXPECT_EQ(mismatch.err.find("model.layers.3.self_attn"), std::string::npos) << mismatch.err;
  // Neither layer_types nor an interval: exit 2 naming the config field.
  const auto none = edited_next_tiny(dir, "none", [](json& c) { c.erase("layer_types"); });
  const auto r = metainfer({"plan", "--model", none.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("config.json: field 'layer_types'"), std::string::npos) << r.err;
}

// A Qwen3-Next config with dense-MLP layers (mlp_only_layers) is a named gap, not a list of missing expert tensors.
TEST(Plan, MlpOnlyLayersIsAGapForQwen3Next) {
  mi_test::TempDir dir("mlp-only");
  const auto model = edited_next_tiny(dir, "m", [](json& c) { c["mlp_only_layers"] = json::array({1}); });
  const auto r = metainfer({"plan", "--model", model.string(), "--json"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(gap_ids(json::parse(r.out)).count("mlp_only_layers")) << r.out;
}

TEST(Plan, ExpertsPerTokenOutsideTheExpertCountExitsTwo) {
  mi_test::TempDir dir("topk");
  for (const int k : {0, 9}) {
    const auto model = edited_next_tiny(dir, "k" + std::to_string(k), [k](json& c) { c["num_experts_per_tok"] = k; });
    const auto r = metainfer({"plan", "--model", model.string()});
    EXPECT_EQ(r.exit_code, 2) << k;
    EXPECT_NE(r.err.find("num_experts_per_tok"), std::string::npos) << r.err;
  }
}

// The generator has no int8 experts: a MoE family with dtype int8 is a named gap (exit 3), not a plan that
// `generate` then refuses.
TEST(Plan, Int8ForMixtureOfExpertsIsAGap) {
  const auto r = metainfer({"plan", "--model", golden("qwen3_next-tiny").string(), "--dtype", "int8", "--json"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const json plan = json::parse(r.out);
  EXPECT_TRUE(gap_ids(plan).count("int8_moe")) << plan.dump(1);
  const auto dense = metainfer({"plan", "--model", golden("qwen3_5-tiny").string(), "--dtype", "int8", "--json"});
  EXPECT_EQ(dense.exit_code, 0) << dense.out << dense.err;
}

TEST(Plan, ImpossibleValuesExitTwoNamingTheField) {
  struct Case {
    std::vector<std::string> args;
    std::string field;
  };
  const std::string m = golden("qwen3-tiny").string();
  const std::vector<Case> cases = {
      {{"--tp", "3"}, "parallel.tensor_parallel"},      // 3 does not divide 4 heads
      {{"--max-context", "100000"}, "runtime.max_context"},  // beyond max_position_embeddings 512
      {{"--dtype", "f16"}, "platform.dtype"},             // no x86 platform runs f16
      {{"--dtype", "int4"}, "platform.dtype"},
      {{"--platform", "riscv"}, "platform.name"},
      {{"--kv-block-size", "12"}, "runtime.kv_block_size"},
      {{"--mode", "serve", "--max-context", "64", "--kv-blocks", "3"}, "runtime.kv_blocks"},  // 64 tokens: 4 blocks
      {{"--mode", "serve", "--kv-blocks", "3"}, "runtime.kv_blocks"},  // the resolved context (512) needs 32
      {{"--mode", "serve", "--kv-blocks", "-1"}, "runtime.kv_blocks"},
      {{"--kv-blocks", "64"}, "runtime.kv_blocks"},  // offline: no shared pool to size
      {{"--mode", "train"}, "runtime.mode"},
      {{"--threads", "-1"}, "platform.threads"},
      {{"--max-batch", "0"}, "runtime.max_batch"},
      {{"--dtype", "int8", "--numerics", "fast"}, "runtime.numerics"},  // int8 runs precise (f32) activations only
      {{"--kv-dtype", "bf16"}, "runtime.kv_dtype"},  // the bf16 KV cache belongs to fast numerics
      {{"--numerics", "fast", "--kv-dtype", "f16"}, "runtime.kv_dtype"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"plan", "--model", m};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = metainfer(args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << "message must name " << c.field << ": " << r.err;
  }
  const auto missing = metainfer({"plan", "--model", "/nonexistent/dir"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("model.path"), std::string::npos) << missing.err;
  const auto nomodel = metainfer({"plan"});
  EXPECT_EQ(nomodel.exit_code, 2);
  EXPECT_NE(nomodel.err.find("model.path"), std::string::npos) << nomodel.err;
}

// A config.json with an impossible dimension is bad input (exit 2 naming the field), never a crash.
TEST(Plan, ZeroDimensionsInConfigAreRejected) {
  for (const char* field : {"num_key_value_heads", "num_hidden_layers", "hidden_size", "num_attention_heads"}) {
    mi_test::TempDir dir("zero");
    std::filesystem::copy_file(golden("qwen3-tiny") / "model.safetensors", dir / "model.safetensors");
    json cfg = json::parse(std::ifstream(golden("qwen3-tiny") / "config.json"));
    cfg[field] = 0;
    mi_test::write_text(dir / "config.json", cfg.dump());
    const auto r = metainfer({"plan", "--model", dir.path().string()});
    EXPECT_EQ(r.exit_code, 2) << field << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
  }
}

TEST(Constraints, GoodFileWithOverrides) {
  mi_test::TempDir dir("constraints");
  mi_test::write_text(dir / "c.toml",
                      "[model]\npath = \"" + golden("qwen3-tiny").string() + "\"\n[platform]\nname = \"auto\"\ndtype = \"bf16\"\n"
                      "threads = 1\n[runtime]\nmode = \"serve\"\nmax_batch = 4\nmax_context = 256\nkv_block_size = 32\nkv_blocks = 20\n"
                      "chunked_prefill = 64\nnumerics = \"fast\"\nkv_dtype = \"bf16\"\n[targets]\nttft_ms = 100\ntpot_ms = 20.5\n");
  const auto r = metainfer({"plan", (dir / "c.toml").string(), "--threads", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(r.out).at("constraints");
  EXPECT_EQ(c.at("threads"), 2);  // the command line overrides the file
  EXPECT_EQ(c.at("kv_dtype"), "bf16");
  EXPECT_EQ(c.at("max_batch"), 4);
  EXPECT_EQ(c.at("max_context"), 256);
  EXPECT_EQ(c.at("kv_block_size"), 32);
  EXPECT_EQ(c.at("kv_blocks"), 20);
  EXPECT_EQ(c.at("chunked_prefill"), 64);
  EXPECT_DOUBLE_EQ(c.at("targets").at("tpot_ms").get<double>(), 20.5);
  // A relative model path is relative to the constraints file.
  mi_test::write_text(dir / "sub/rel.toml", "[model]\npath = \"../m\"\n");
  std::filesystem::create_directories(dir / "m");
  std::filesystem::copy(golden("qwen3-tiny"), dir / "m", std::filesystem::copy_options::recursive);
  EXPECT_EQ(metainfer({"plan", (dir / "sub/rel.toml").string()}).exit_code, 0);
}

TEST(Constraints, BadFilesExitTwoNamingTheField) {
  mi_test::TempDir dir("badconstraints");
  const std::string model = "[model]\npath = \"" + golden("qwen3-tiny").string() + "\"\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {model + "[runtime]\nmax_batchh = 2\n", "runtime.max_batchh"},        // unknown key
      {model + "[runtim]\nmax_batch = 2\n", "runtim"},                      // unknown section
      {model + "[runtime]\nmax_batch = \"two\"\n", "runtime.max_batch"},    // wrong type
      {model + "[runtime]\nprefix_cache = 1\n", "runtime.prefix_cache"},   // wrong type
      {model + "[platform]\nthreads = 1.5\n", "platform.threads"},
      {model + "[runtime]\nmax_context = -5\n", "runtime.max_context"},
      {model + "[runtime]\nchunked_prefill = -1\n", "runtime.chunked_prefill"},
      {model + "[targets]\nttft_ms = -3\n", "targets.ttft_ms"},
      {model + "[runtime\n", "TOML syntax error"},
      {"[model]\npath = 5\n", "model.path"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto file = dir / ("c" + std::to_string(i) + ".toml");
    mi_test::write_text(file, cases[i].first);
    const auto r = metainfer({"plan", file.string()});
    EXPECT_EQ(r.exit_code, 2) << cases[i].first << r.err;
    EXPECT_NE(r.err.find(cases[i].second), std::string::npos) << "expected '" << cases[i].second << "' in: " << r.err;
    EXPECT_NE(r.err.find(file.string()), std::string::npos) << "the message must name the file: " << r.err;
  }
}

TEST(Platform, ReportsFeaturesAndTheAutoPlatform) {
  const auto r = metainfer({"platform", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_GT(j.at("logical_cpus").get<int>(), 0);
  EXPECT_GT(j.at("memory_total_bytes").get<uint64_t>(), 0u);
  const auto cpu = mi::platform::detect_cpu();
  EXPECT_EQ(j.at("features").size(), cpu.feature_names().size());
  EXPECT_EQ(cpu.avx2, bool(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(cpu.avx512f, bool(__builtin_cpu_supports("avx512f")));
  if (cpu.avx2 && cpu.fma && cpu.f16c) EXPECT_FALSE(j.at("auto_platform").is_null());
}

}  // namespace
