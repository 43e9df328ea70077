// `metainfer synth-model`: real HF layout, deterministic for a seed, sharded above the limit, covered by plan.
#include <gtest/gtest.h>

#include <fstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "common/json_file.h"
#include "generator/manifest.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "synth/synth_model.h"

namespace {
namespace fs = std::filesystem;
using mi_test::metainfer;

TEST(SynthModel, TinyQwen3IsDeterministicAndCovered) {
  mi_test::TempDir dir("synth");
  for (const char* out : {"a", "b"}) {
    const auto r = metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--dtype", "bf16", "--seed", "7",
                              "--no-tokenizer", "-o", (dir / out).string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(mi::generator::sha256_file(dir / "a/model.safetensors"), mi::generator::sha256_file(dir / "b/model.safetensors"));
  const auto other = metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--seed", "8", "--no-tokenizer",
                                "-o", (dir / "c").string()});
  ASSERT_EQ(other.exit_code, 0);
  EXPECT_NE(mi::generator::sha256_file(dir / "a/model.safetensors"), mi::generator::sha256_file(dir / "c/model.safetensors"));
  const auto cfg = mi::io::load_model_config(dir / "a");
  EXPECT_EQ(cfg.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(cfg.vocab_size, 151936);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_EQ(metainfer({"plan", "--model", (dir / "a").string()}).exit_code, 0);
}

// A hybrid preset: layer_types from full_attention_interval (every 4th layer full attention), nested rope_parameters
// with the M-RoPE sections, and a checkpoint plan covers as family qwen3_5.
TEST(SynthModel, HybridQwen35PresetHasItsLayerPatternAndIsCovered) {
  mi_test::TempDir dir("synth-hybrid");
  const auto r = metainfer({"synth-model", "--family", "qwen3_5", "--preset", "tiny", "--seed", "3", "--no-tokenizer",
                            "-o", (dir / "m").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json cfg = mi::read_json_file(dir / "m" / "config.json");
  EXPECT_EQ(cfg.at("architectures"), nlohmann::json({"Qwen3_5ForCausalLM"}));
  EXPECT_EQ(cfg.at("layer_types"),
            nlohmann::json({"linear_attention", "linear_attention", "linear_attention", "full_attention"}));
  EXPECT_EQ(cfg.at("rope_parameters").at("mrope_section"), nlohmann::json({2, 1, 1}));
  EXPECT_EQ(cfg.at("rope_parameters").at("rope_type"), "default");
  const auto plan = metainfer({"plan", "--model", (dir / "m").string(), "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.out;
  EXPECT_EQ(nlohmann::json::parse(plan.out).at("model").at("family"), "qwen3_5");
  const mi::ckb::Ckb ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  const auto& q = ckb.find_family("qwen3_5")->presets;
  EXPECT_EQ(q.at("0.8b").at("num_hidden_layers"), "24");
  EXPECT_EQ(q.at("0.8b").at("rope_parameters.mrope_section"), "[11,11,10]");
}

TEST(SynthModel, PresetsCarryTheRealDimensions) {
  const mi::ckb::Ckb ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  const auto& q = ckb.find_family("qwen3")->presets;
  EXPECT_EQ(q.at("0.6b").at("hidden_size"), "1024");
  EXPECT_EQ(q.at("0.6b").at("num_hidden_layers"), "28");
  EXPECT_EQ(q.at("8b").at("intermediate_size"), "12288");
  const auto& l = ckb.find_family("llama")->presets;
  EXPECT_EQ(l.at("8b").at("intermediate_size"), "14336");
}

TEST(SynthModel, ShardsAboveTheLimitWithAnIndex) {
  mi_test::TempDir dir("synth-shards");
  const mi::ckb::Ckb ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  mi::synth::SynthOptions o;
  o.family = "llama";
  o.preset = "tiny";
  o.dtype = "f32";
  o.with_tokenizer = false;
  o.out = dir / "m";
  o.max_shard_bytes = 40u << 20;  // the tiny llama (~130 MB in f32) spans several shards
  const auto r = mi::synth::synth_model(ckb, o);
  EXPECT_GT(r.shards, 1);
  EXPECT_TRUE(fs::exists(dir / "m/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / "m/model.safetensors"));
  const auto store = mi::io::WeightStore::open(dir / "m");
  EXPECT_TRUE(store.find("model.layers.1.mlp.down_proj.weight"));
  EXPECT_EQ(store.total_bytes(), r.bytes);
  const auto cfg = mi::io::load_model_config(dir / "m");
  ASSERT_TRUE(cfg.rope_scaling.has_value() == false);  // tiny keeps no rope scaling
}

TEST(SynthModel, RefusesToOverwriteAndRejectsUnknownPresets) {
  mi_test::TempDir dir("synth-refuse");
  mi_test::write_text(dir / "keep/user_file.txt", "mine");
  const auto r = metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--no-tokenizer", "-o", (dir / "keep").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "keep/user_file.txt"));
  const auto p = metainfer({"synth-model", "--family", "llama", "--preset", "0.6b", "-o", (dir / "x").string()});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("1b"), std::string::npos) << "lists the family's presets: " << p.err;
  const auto f = metainfer({"synth-model", "--family", "gpt2", "-o", (dir / "y").string()});
  EXPECT_EQ(f.exit_code, 2);
}

TEST(SynthModel, WithTokenizerFilesWhenSetupFetchedThem) {
  const fs::path cache = fs::path(METAINFER_TOKENIZERS) / "qwen3" / "tokenizer.json";
  ASSERT_TRUE(fs::exists(cache)) << cache << " missing: run ./setup.sh";
  mi_test::TempDir dir("synth-tok");
  const auto r = metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "-o", (dir / "m").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "m/tokenizer.json"));
  const auto plan = nlohmann::json::parse(metainfer({"plan", "--model", (dir / "m").string(), "--json"}).out);
  EXPECT_TRUE(plan.at("covered").get<bool>());
  EXPECT_TRUE(plan.at("model").at("tokenizer").get<bool>());
  EXPECT_EQ(mi::io::load_model_config(dir / "m").eos_token_ids, std::vector<int>({151645}));
}

}  // namespace
