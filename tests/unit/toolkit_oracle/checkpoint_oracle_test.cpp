// The oracle's loader and config handling: other stored dtypes and layouts give the same answers, tied and untied
// heads, Llama 3 rope scaling, the Qwen3.5 vision-language layout (text_config, model.language_model.*), every
// malformed or unsupported input (dense or hybrid) is refused with a message naming the file and the field or
// tensor, and the oracle's sources include nothing from components/.
#include <gtest/gtest.h>

#include <regex>

#include "oracle/reference_forward.h"
#include "oracle_support.h"

namespace {

using namespace oracle_test;
using mi::oracle::ReferenceModel;

struct Prompt {
  std::vector<int> prompt, greedy;
};

std::vector<Prompt> trace_prompts(const std::string& name) {
  std::vector<Prompt> out;
  const json trace = read_json(mi_test::golden(name) / "trace.json");
  for (const json& p : trace.at("prompts"))
    out.push_back({p.at("prompt_ids").get<std::vector<int>>(), p.at("greedy_ids").get<std::vector<int>>()});
  return out;
}

std::vector<int> greedy_ids(const ReferenceModel& model, const std::vector<int>& prompt, int n) {
  std::vector<int> ids;
  for (const auto& s : mi::oracle::greedy(model, prompt, n)) ids.push_back(s.id);
  return ids;
}

void expect_matches_trace(const fs::path& dir, const std::string& golden_case) {
  const ReferenceModel model(dir, 2);
  const std::vector<Prompt> prompts = trace_prompts(golden_case);
  ASSERT_EQ(prompts.size(), 3u);
  for (const Prompt& p : prompts)
    EXPECT_EQ(greedy_ids(model, p.prompt, static_cast<int>(p.greedy.size())), p.greedy);
}

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "message: '" << (message) << "' lacks '" << (part) << "'"

// ---- other layouts and dtypes ---------------------------------------------------------------------------------

TEST(OracleCheckpoint, F32CopyGivesIdenticalGreedyIds) {
  mi_test::TempDir tmp("oracle-f32");
  for (const char* c : {"qwen3-tiny", "llama-tiny"}) {
    SCOPED_TRACE(c);
    copy_case(c, tmp / c, {}, [](std::vector<OwnedTensor>& ts) {
      for (OwnedTensor& t : ts) t = to_f32(t);
    });
    expect_matches_trace(tmp / c, c);
  }
}

TEST(OracleCheckpoint, F16CopyGivesIdenticalGreedyIds) {
  EXPECT_EQ(mi::oracle::f16_to_double(f16_bits(0.1f)), 0.0999755859375);  // the test's own encoder, checked
  EXPECT_EQ(mi::oracle::f16_to_double(f16_bits(-3e-6f)), -50 * std::ldexp(1.0, -24));
  mi_test::TempDir tmp("oracle-f16");
  copy_case("qwen3-hd128", tmp.path(), {}, [](std::vector<OwnedTensor>& ts) {
    for (OwnedTensor& t : ts) t = to_f16(t);
  });
  expect_matches_trace(tmp.path(), "qwen3-hd128");
}

TEST(OracleCheckpoint, TextConfigRopeParametersAndDefaultHeadDim) {
  mi_test::TempDir tmp("oracle-config-forms");
  // A composite config: the dimensions under text_config, the architecture at the top.
  copy_case("qwen3-tiny", tmp / "nested", [](json& c) {
    json outer = {{"architectures", c.at("architectures")}, {"model_type", "qwen3_wrapper"}};
    c.erase("architectures");
    outer["text_config"] = c;
    c = outer;
  });
  const ReferenceModel nested(tmp / "nested");
  EXPECT_EQ(nested.config().config_source, "config.json: text_config");
  EXPECT_EQ(nested.config().hidden_size, 128);
  expect_matches_trace(tmp / "nested", "qwen3-tiny");
  // transformers 5: rope_theta inside rope_parameters (a wrong top-level value is overridden by it).
  copy_case("llama-tiny", tmp / "v5", [](json& c) {
    c.erase("rope_scaling");
    c["rope_theta"] = 123.0;
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
    c.erase("head_dim");  // then hidden_size / num_attention_heads = 32
  });
  EXPECT_EQ(ReferenceModel(tmp / "v5").config().rope_theta, 10000.0);
  EXPECT_EQ(ReferenceModel(tmp / "v5").config().head_dim, 32);
  expect_matches_trace(tmp / "v5", "llama-tiny");
}

// Qwen3_5ForConditionalGeneration: the text model's config under text_config, its decoder's tensors under
// model.language_model.* (lm_head.weight stays at the top); the oracle runs the text decoder, token ids only.
TEST(OracleCheckpoint, Qwen3_5ConditionalGenerationLayout) {
  mi_test::TempDir tmp("oracle-qwen3_5-vl");
  copy_case("qwen3_5-tiny", tmp.path(),
            [](json& c) {
              c.erase("architectures");
              json outer = {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
                            {"model_type", "qwen3_5"},
                            {"tie_word_embeddings", false},
                            {"text_config", c}};
              c = outer;
            },
            [](std::vector<OwnedTensor>& ts) {
              for (OwnedTensor& t : ts)
                if (t.name.starts_with("model.")) t.name = "model.language_model." + t.name.substr(6);
            });
  const ReferenceModel m(tmp.path(), 2);
  EXPECT_EQ(m.architecture(), "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(m.config().config_source, "config.json: text_config");
  EXPECT_EQ(m.config().weight_prefix, "model.language_model.");
  EXPECT_EQ(m.config().model_type, "qwen3_5_text");
  expect_matches_trace(tmp.path(), "qwen3_5-tiny");
}

TEST(OracleCheckpoint, HybridConfigIsReadAsStated) {
  const ReferenceModel q35(mi_test::golden("qwen3_5-tiny"));
  const mi::oracle::ReferenceConfig& c = q35.config();
  EXPECT_EQ(c.rotary_dim, 8);          // head_dim 32 x partial_rotary_factor 0.25
  EXPECT_EQ(c.rope_theta, 1e7);        // from rope_parameters
  EXPECT_TRUE(c.norm_one_plus_weight);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_FALSE(c.grouped_linear_proj);
  ASSERT_EQ(c.layer_kinds.size(), 4u);
  EXPECT_EQ(c.layer_kinds[0], mi::oracle::LayerKind::LinearAttention);
  EXPECT_EQ(c.layer_kinds[3], mi::oracle::LayerKind::FullAttention);
  EXPECT_EQ(c.mlp_kinds[0], mi::oracle::MlpKind::Dense);
  EXPECT_EQ(c.linear.num_value_heads, 4);
  const ReferenceModel next(mi_test::golden("qwen3_next-tiny"));
  EXPECT_EQ(next.config().rope_theta, 1e7);  // top level
  EXPECT_EQ(next.config().rotary_dim, 8);
  EXPECT_TRUE(next.config().grouped_linear_proj);
  for (const auto k : next.config().mlp_kinds) EXPECT_EQ(k, mi::oracle::MlpKind::SparseMoe);
  EXPECT_EQ(next.config().moe.num_experts, 8);
  EXPECT_EQ(next.config().moe.experts_per_token, 2);
  EXPECT_TRUE(next.config().moe.norm_topk_prob);
}

// The Sequence state of a DeltaNet layer is fixed-size (conv window + recurrent state); continuing a sequence token
// by token gives the logits of one forward over the whole (the recurrent form is the prefill's form too).
TEST(OracleCheckpoint, HybridSequenceStateContinues) {
  const ReferenceModel m(mi_test::golden("qwen3_next-tiny"));
  const Prompt p = trace_prompts("qwen3_next-tiny").at(1);
  ReferenceModel::Sequence whole = m.new_sequence();
  const std::vector<double> all = m.append(whole, p.prompt);
  ReferenceModel::Sequence parts = m.new_sequence();
  std::vector<double> rows;
  const std::vector<int> head(p.prompt.begin(), p.prompt.begin() + 4), tail(p.prompt.begin() + 4, p.prompt.end());
  for (const auto* part : {&head, &tail}) {
    const std::vector<double> r = m.append(parts, *part);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  ASSERT_EQ(rows.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(rows[i], all[i], 1e-12) << i;
  EXPECT_EQ(whole.layers[0].conv.size(), 3u * 128);      // (K-1) x C
  EXPECT_EQ(whole.layers[0].state.size(), 4u * 16 * 16);  // nv x dk x dv
  EXPECT_TRUE(whole.layers[0].k.empty());
  EXPECT_EQ(whole.layers[3].k.size(), 10u * 64);          // full attention: length x nKV*D
}

TEST(OracleCheckpoint, ShardedCheckpointGivesIdenticalGreedyIds) {
  mi_test::TempDir tmp("oracle-shards");
  copy_case("qwen3-hd128", tmp.path(), {}, {}, 400 * 1024);  // several shards + model.safetensors.index.json
  ASSERT_TRUE(fs::exists(tmp / "model.safetensors.index.json"));
  ASSERT_FALSE(fs::exists(tmp / "model.safetensors"));
  expect_matches_trace(tmp.path(), "qwen3-hd128");
}

TEST(OracleCheckpoint, ThreadCountDoesNotChangeLogits) {
  for (const char* c : {"qwen3-hd128", "qwen3_next-tiny"}) {
    SCOPED_TRACE(c);
    const ReferenceModel one(mi_test::golden(c), 1), three(mi_test::golden(c), 3);
    const Prompt p = trace_prompts(c).at(2);
    EXPECT_EQ(mi::oracle::teacher_forced_logits(one, p.prompt, p.greedy),
              mi::oracle::teacher_forced_logits(three, p.prompt, p.greedy));  // bit-identical: rows are independent
  }
}

TEST(OracleCheckpoint, Float16Decoding) {
  using mi::oracle::f16_to_double;
  EXPECT_EQ(f16_to_double(0x3C00), 1.0);
  EXPECT_EQ(f16_to_double(0xC000), -2.0);
  EXPECT_EQ(f16_to_double(0x3555), (1 + 0x155 / 1024.0) / 4);  // exponent 13, mantissa 0x155: 0.333251953125
  EXPECT_EQ(f16_to_double(0x7BFF), 65504.0);                   // largest normal
  EXPECT_EQ(f16_to_double(0x0400), std::ldexp(1.0, -14));      // smallest normal
  EXPECT_EQ(f16_to_double(0x0001), std::ldexp(1.0, -24));      // smallest subnormal
  EXPECT_EQ(f16_to_double(0x8000), 0.0);
  EXPECT_TRUE(std::signbit(f16_to_double(0x8000)));
  EXPECT_TRUE(std::isinf(f16_to_double(0xFC00)) && f16_to_double(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_double(0x7E00)));
  EXPECT_EQ(mi::oracle::bf16_to_double(0x3F80), 1.0);
  EXPECT_EQ(mi::oracle::bf16_to_double(0xC0A0), -5.0);
}

// ---- tied / untied ---------------------------------------------------------------------------------------------

TEST(OracleCheckpoint, TiedAndUntiedHeads) {
  // qwen3-tiny (and -s1) are tied: no lm_head.weight in the file; the others are untied.
  for (const std::string& c : supported_golden_cases()) {
    const ReferenceModel m(mi_test::golden(c));
    const bool tied = c == "qwen3-tiny" || c == "qwen3-tiny-s1";
    EXPECT_EQ(m.config().tie_word_embeddings, tied) << c;
  }
  mi_test::TempDir tmp("oracle-tie");
  // The tied case written untied, with lm_head.weight = the embedding: the same model, the same ids.
  copy_case("qwen3-tiny", tmp / "untied", [](json& c) { c["tie_word_embeddings"] = false; },
            [](std::vector<OwnedTensor>& ts) {
              for (const OwnedTensor& t : ts)
                if (t.name == "model.embed_tokens.weight") {
                  OwnedTensor head = t;
                  head.name = "lm_head.weight";
                  ts.push_back(head);
                  break;
                }
            });
  expect_matches_trace(tmp / "untied", "qwen3-tiny");
  // Untied without a head: the missing tensor is named.
  copy_case("qwen3-tiny", tmp / "nohead", [](json& c) { c["tie_word_embeddings"] = false; });
  const std::string msg = error_of([&] { ReferenceModel m(tmp / "nohead"); });
  EXPECT_ERROR_HAS(msg, "lm_head.weight");
  EXPECT_ERROR_HAS(msg, "missing");
  // An untied head changes the answer when it differs from the embedding (it is really used).
  copy_case("llama-tiny", tmp / "tied-llama", [](json& c) { c["tie_word_embeddings"] = true; });
  const ReferenceModel tied_llama(tmp / "tied-llama");
  const Prompt p = trace_prompts("llama-tiny").at(1);
  EXPECT_NE(greedy_ids(tied_llama, p.prompt, static_cast<int>(p.greedy.size())), p.greedy);
}

// ---- rotary -----------------------------------------------------------------------------------------------------

// rope_inv_freq rounds to float32 (Hugging Face's table is float32): compare with a relative tolerance of 1e-6.
void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-6 * std::fabs(want)) << "want " << want; }

TEST(OracleRope, DefaultFrequencies) {
  const auto f = mi::oracle::rope_inv_freq(32, 10000.0, {});
  ASSERT_EQ(f.size(), 16u);
  EXPECT_EQ(f[0], 1.0);
  expect_close(f[1], std::pow(10000.0, -2.0 / 32));
  expect_close(f[15], std::pow(10000.0, -30.0 / 32));
  EXPECT_EQ(f[15], static_cast<double>(static_cast<float>(f[15])));  // a float32 value
}

TEST(OracleRope, Llama3ScalingByHand) {
  // Llama 3.1 8B: head_dim 128, theta 500000, factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192.
  // Wavelength bounds: high 8192/4 = 2048, low 8192/1 = 8192.
  mi::oracle::RopeScaling s;
  s.type = "llama3";
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  const auto f = mi::oracle::rope_inv_freq(128, 500000.0, s);
  ASSERT_EQ(f.size(), 64u);
  // i = 1: f = 500000^(-2/128) = 0.81461723..., wavelength 7.7 < 2048: unchanged.
  expect_close(f[1], 0.8146172338565447);
  // i = 30: f = 500000^(-60/128) = 0.0021311195369119653, wavelength 2948.3 in [2048, 8192]:
  //   smooth = (8192 / 2948.3 - 1) / (4 - 1) = 0.5928492950029659,
  //   (1 - smooth) * f / 8 + smooth * f = 0.0013718935677611381.
  expect_close(f[30], 0.0013718935677611381);
  // i = 40: f = 500000^(-80/128) = 2.742481756762073e-4, wavelength 22910 > 8192: f / 8 = 3.428102195952591e-5.
  expect_close(f[40], 3.428102195952591e-05);
  // i = 0 is always 1; the last, i = 63, is low-frequency: f / 8.
  EXPECT_EQ(f[0], 1.0);
  expect_close(f[63], std::pow(500000.0, -126.0 / 128) / 8);
}

TEST(OracleRope, Llama3ConfigIsReadAndUsed) {
  mi_test::TempDir tmp("oracle-rope");
  // factor 1 leaves every frequency as it is: the llama-tiny trace still holds.
  copy_case("llama-tiny", tmp / "identity", [](json& c) {
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 1.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  });
  const ReferenceModel identity(tmp / "identity");
  EXPECT_EQ(identity.config().rope_scaling.type, "llama3");
  for (const Prompt& p : trace_prompts("llama-tiny"))
    EXPECT_EQ(greedy_ids(identity, p.prompt, static_cast<int>(p.greedy.size())), p.greedy);
  // A real scaling (short original context, factor 8) changes the long prompt's logits.
  copy_case("llama-tiny", tmp / "scaled", [](json& c) {
    c["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  });
  const ReferenceModel scaled(tmp / "scaled");
  const Prompt p2 = trace_prompts("llama-tiny").at(2);
  const auto a = mi::oracle::teacher_forced_logits(identity, p2.prompt, p2.greedy);
  const auto b = mi::oracle::teacher_forced_logits(scaled, p2.prompt, p2.greedy);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-3);
}

// ---- bad inputs ---------------------------------------------------------------------------------------------------

std::string load_error(const fs::path& dir) {
  return error_of([&] { ReferenceModel m(dir); });
}

std::string config_error(const std::string& tag, const std::function<void(json&)>& edit,
                         const std::string& base = "qwen3-tiny") {
  mi_test::TempDir tmp("oracle-cfg-" + tag);
  const fs::path src = mi_test::golden(base);
  json config = read_json(src / "config.json");
  edit(config);
  write_json(tmp / "config.json", config);
  fs::copy_file(src / "model.safetensors", tmp / "model.safetensors");
  return load_error(tmp.path());
}

TEST(OracleBadInput, UnsupportedArchitecturesAreRefused) {
  for (const char* arch : {"Qwen3_5MoeForCausalLM", "Qwen3MoeForCausalLM"}) {
    const std::string msg = config_error("arch-hybrid", [&](json& c) { c["architectures"] = {arch}; }, "qwen3_5-tiny");
    EXPECT_ERROR_HAS(msg, "architectures");
    EXPECT_ERROR_HAS(msg, "config.json");
    EXPECT_ERROR_HAS(msg, arch);
  }
  EXPECT_ERROR_HAS(config_error("arch", [](json& c) { c["architectures"] = {"MistralForCausalLM"}; }),
                   "MistralForCausalLM");
  EXPECT_ERROR_HAS(config_error("noarch", [](json& c) { c.erase("architectures"); }), "'architectures' is missing");
}

TEST(OracleBadInput, UnimplementedConfigValuesAreRefused) {
  struct Case {
    const char* tag;
    std::function<void(json&)> edit;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"gelu", [](json& c) { c["hidden_act"] = "gelu"; }, "hidden_act"},
      {"attnbias", [](json& c) { c["attention_bias"] = true; }, "attention_bias"},
      {"mlpbias", [](json& c) { c["mlp_bias"] = true; }, "mlp_bias"},
      {"swa", [](json& c) { c["use_sliding_window"] = true; }, "use_sliding_window"},
      {"moe", [](json& c) { c["num_experts"] = 8; }, "num_experts"},
      {"yarn", [](json& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }, "yarn"},
      {"llama3-incomplete", [](json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; },
       "low_freq_factor"},
      {"partial", [](json& c) { c["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor"},
      {"linear-layer", [](json& c) { c["layer_types"][1] = "linear_attention"; }, "layer_types[1]"},
      {"quant", [](json& c) { c["quantization_config"] = {{"quant_method", "gptq"}}; }, "quantization_config"},
      {"novocab", [](json& c) { c.erase("vocab_size"); }, "'vocab_size' is missing"},
      {"badhidden", [](json& c) { c["hidden_size"] = "abc"; }, "hidden_size"},
      {"kvheads", [](json& c) { c["num_key_value_heads"] = 3; }, "num_key_value_heads"},
      {"badtie", [](json& c) { c["tie_word_embeddings"] = "yes"; }, "tie_word_embeddings"},
  };
  for (const Case& c : cases) {
    const std::string msg = config_error(c.tag, c.edit);
    EXPECT_ERROR_HAS(msg, c.expect);
    EXPECT_ERROR_HAS(msg, "config.json");
  }
  // A changed dimension is caught by the weight shapes, naming the tensor.
  const std::string msg = config_error("dim", [](json& c) { c["intermediate_size"] = 512; });
  EXPECT_ERROR_HAS(msg, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_ERROR_HAS(msg, "[256, 128]");
}

TEST(OracleBadInput, UnimplementedHybridConfigValuesAreRefused) {
  struct Case {
    const char* tag;
    const char* base;
    std::function<void(json&)> edit;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"ltype", "qwen3_5-tiny", [](json& c) { c["layer_types"][2] = "sliding_attention"; }, "layer_types[2]"},
      {"noltypes", "qwen3_next-tiny", [](json& c) { c.erase("layer_types"); }, "'layer_types' is missing"},
      {"nokheads", "qwen3_5-tiny", [](json& c) { c.erase("linear_num_key_heads"); }, "linear_num_key_heads"},
      {"vheads", "qwen3_next-tiny", [](json& c) { c["linear_num_value_heads"] = 3; }, "linear_num_value_heads"},
      {"mrope", "qwen3_5-tiny", [](json& c) { c["rope_parameters"]["mrope_section"] = {2, 2, 1}; },
       "mrope_section"},
      {"nopartial", "qwen3_next-tiny", [](json& c) { c.erase("partial_rotary_factor"); }, "partial_rotary_factor"},
      {"oddrotary", "qwen3_next-tiny", [](json& c) { c["partial_rotary_factor"] = 0.1; }, "partial_rotary_factor"},
      {"moe35", "qwen3_5-tiny", [](json& c) { c["num_experts"] = 8; }, "num_experts"},
      {"topk", "qwen3_next-tiny", [](json& c) { c["num_experts_per_tok"] = 9; }, "num_experts_per_tok"},
      {"nonorm", "qwen3_next-tiny", [](json& c) { c.erase("norm_topk_prob"); }, "norm_topk_prob"},
      {"noshared", "qwen3_next-tiny", [](json& c) { c.erase("shared_expert_intermediate_size"); },
       "shared_expert_intermediate_size"},
      {"ungated", "qwen3_5-tiny", [](json& c) { c["attn_output_gate"] = false; }, "attn_output_gate"},
      {"onlylayers", "qwen3_next-tiny", [](json& c) { c["mlp_only_layers"] = {7}; }, "mlp_only_layers"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag);
    const std::string msg = config_error(c.tag, c.edit, c.base);
    EXPECT_ERROR_HAS(msg, c.expect);
    EXPECT_ERROR_HAS(msg, "config.json");
  }
  // Shapes and names of the hybrid tensors are checked, naming the tensor.
  std::string msg = config_error("kdim", [](json& c) { c["linear_key_head_dim"] = 8; }, "qwen3_next-tiny");
  EXPECT_ERROR_HAS(msg, "model.layers.0.linear_attn.in_proj_qkvz.weight");
  EXPECT_ERROR_HAS(msg, "[192, 128]");
  msg = config_error("experts", [](json& c) { c["num_experts"] = 9; }, "qwen3_next-tiny");
  EXPECT_ERROR_HAS(msg, "model.layers.0.mlp.gate.weight");
  // A dense MLP layer in qwen3_next (mlp_only_layers) needs the dense tensors, which the file lacks.
  msg = config_error("denselayer", [](json& c) { c["mlp_only_layers"] = {1}; }, "qwen3_next-tiny");
  EXPECT_ERROR_HAS(msg, "model.layers.1.mlp.gate_proj.weight");
  // int8 weights are contracted for the dense families only.
  msg = error_of([] {
    ReferenceModel m(mi_test::golden("qwen3_5-tiny"), 1, mi::oracle::WeightQuantization::int8_per_row);
  });
  EXPECT_ERROR_HAS(msg, "int8");
  EXPECT_ERROR_HAS(msg, "Qwen3_5ForCausalLM");
  // Dense families keep refusing the hybrid-only features.
  EXPECT_ERROR_HAS(config_error("dense-mrope", [](json& c) {
                     c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"mrope_section", {8, 4, 4}}};
                   }),
                   "mrope_section");
}

TEST(OracleBadInput, MissingOrMisshapedTensorsAreNamed) {
  mi_test::TempDir tmp("oracle-tensors");
  copy_case("qwen3-tiny", tmp / "missing", {}, [](std::vector<OwnedTensor>& ts) {
    std::erase_if(ts, [](const OwnedTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  std::string msg = load_error(tmp / "missing");
  EXPECT_ERROR_HAS(msg, "model.layers.1.mlp.up_proj.weight");
  EXPECT_ERROR_HAS(msg, "missing");

  copy_case("qwen3-tiny", tmp / "qnorm", {}, [](std::vector<OwnedTensor>& ts) {
    std::erase_if(ts, [](const OwnedTensor& t) { return t.name == "model.layers.2.self_attn.k_norm.weight"; });
  });
  EXPECT_ERROR_HAS(load_error(tmp / "qnorm"), "model.layers.2.self_attn.k_norm.weight");

  copy_case("llama-tiny", tmp / "shape", {}, [](std::vector<OwnedTensor>& ts) {
    for (OwnedTensor& t : ts)
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {128, 64};  // stored [64, 128]
  });
  msg = load_error(tmp / "shape");
  EXPECT_ERROR_HAS(msg, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_ERROR_HAS(msg, "shape [128, 64], expected [64, 128]");
}

// A hand-written safetensors file: one F64 tensor where a BF16 one is expected.
TEST(OracleBadInput, UnsupportedDtypeIsNamed) {
  mi_test::TempDir tmp("oracle-dtype");
  copy_case("qwen3-tiny", tmp.path(), {}, [](std::vector<OwnedTensor>& ts) {
    std::erase_if(ts, [](const OwnedTensor& t) { return t.name == "model.norm.weight"; });
  });
  // Rewrite the file with model.norm.weight appended as F64 (a valid safetensors file the oracle cannot read).
  std::ifstream in(tmp / "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  json header = json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  header["model.norm.weight"] = {
      {"dtype", "F64"}, {"shape", {128}}, {"data_offsets", {data.size(), data.size() + 1024}}};
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  out += h + data + std::string(1024, '\0');
  std::ofstream(tmp / "model.safetensors", std::ios::binary) << out;
  const std::string msg = load_error(tmp.path());
  EXPECT_ERROR_HAS(msg, "model.norm.weight");
  EXPECT_ERROR_HAS(msg, "F64");
}

TEST(OracleBadInput, TruncatedAndMissingFiles) {
  mi_test::TempDir tmp("oracle-files");
  const fs::path src = mi_test::golden("qwen3-tiny");
  fs::create_directories(tmp / "cut");
  fs::copy_file(src / "config.json", tmp / "cut" / "config.json");
  fs::copy_file(src / "model.safetensors", tmp / "cut" / "model.safetensors");
  fs::resize_file(tmp / "cut" / "model.safetensors", fs::file_size(src / "model.safetensors") / 2);
  std::string msg = load_error(tmp / "cut");
  EXPECT_ERROR_HAS(msg, "model.safetensors");
  EXPECT_ERROR_HAS(msg, "truncated");

  fs::resize_file(tmp / "cut" / "model.safetensors", 100);  // inside the header
  EXPECT_ERROR_HAS(load_error(tmp / "cut"), "truncated");
  fs::resize_file(tmp / "cut" / "model.safetensors", 3);
  EXPECT_ERROR_HAS(load_error(tmp / "cut"), "truncated");

  fs::create_directories(tmp / "noweights");
  fs::copy_file(src / "config.json", tmp / "noweights" / "config.json");
  EXPECT_ERROR_HAS(load_error(tmp / "noweights"), "no model.safetensors");

  fs::create_directories(tmp / "noconfig");
  EXPECT_ERROR_HAS(load_error(tmp / "noconfig"), "config.json");
  EXPECT_ERROR_HAS(load_error(tmp / "does-not-exist"), "does-not-exist");

  // A shard the index names is missing.
  copy_case("qwen3-hd128", tmp / "shards", {}, {}, 400 * 1024);
  fs::path victim;
  for (const auto& e : fs::directory_iterator(tmp / "shards"))
    if (e.path().filename().string().starts_with("model-00002")) victim = e.path();
  ASSERT_FALSE(victim.empty());
  fs::remove(victim);
  msg = load_error(tmp / "shards");
  EXPECT_ERROR_HAS(msg, "model.safetensors.index.json");
  EXPECT_ERROR_HAS(msg, victim.filename().string());
}

TEST(OracleBadInput, TokenIdsAndPromptsAreChecked) {
  const ReferenceModel m(mi_test::golden("qwen3-tiny"));
  EXPECT_ERROR_HAS(error_of([&] { mi::oracle::greedy(m, {1, 512}, 1); }), "token id 512");
  EXPECT_ERROR_HAS(error_of([&] { mi::oracle::greedy(m, {-1}, 1); }), "token id -1");
  EXPECT_ERROR_HAS(error_of([&] { mi::oracle::greedy(m, {}, 1); }), "non-empty prompt");
  EXPECT_TRUE(mi::oracle::greedy(m, {1}, 0).empty());
  EXPECT_ERROR_HAS(error_of([&] { ReferenceModel bad(mi_test::golden("qwen3-tiny"), 0); }), "threads");
}

// ---- independence -------------------------------------------------------------------------------------------------

TEST(OracleIndependence, IncludesNothingFromComponents) {
  const fs::path dir = fs::path(METAINFER_SOURCE_DIR) / "toolkit" / "oracle";
  const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^">]+)[">])");
  const std::vector<std::string> component_dirs = {"common", "io",     "tokenizer", "chat",
                                                   "kernels", "model", "runtime",   "engine"};
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      std::string path = m[1].str();
      for (const std::string prefix : {"components/", "../", "../../components/"})
        if (path.starts_with(prefix)) ADD_FAILURE() << e.path() << ":" << line_no << ": includes " << path;
      const std::string top = path.substr(0, path.find('/'));
      for (const std::string& c : component_dirs)
        EXPECT_NE(top, c) << e.path() << ":" << line_no << ": includes " << path
                          << " from components/ (the oracle must share no code with the engines it judges)";
      if (path.find('/') != std::string::npos && top != "oracle" && top != "nlohmann" && top != "sys")
        ADD_FAILURE() << e.path() << ":" << line_no << ": includes " << path
                      << " (only the standard library, POSIX, nlohmann/json and oracle/ are allowed)";
    }
  }
  EXPECT_GE(files, 4);
}

}  // namespace
