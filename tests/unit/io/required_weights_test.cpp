// check_required_weights on the golden dense checkpoints, with the required list built by hand from each config
// (as the generator will emit it from the family knowledge), and on deliberately wrong expectations.
#include <gtest/gtest.h>

#include "io/model_config.h"
#include "io/required_weights.h"
#include "io_test_util.h"

namespace mi::io {
namespace {

using test::error_of;

const std::filesystem::path kGolden = std::filesystem::path(METAINFER_TEST_DATA) / "golden";

// The dense Qwen3 / Llama tensor list (golden README), derived from the parsed config.
std::vector<RequiredTensor> dense_required(const ModelConfig& c, bool qk_norm) {
  const int64_t V = c.vocab_size, H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_rows = int64_t(c.num_attention_heads) * D, kv_rows = int64_t(c.num_key_value_heads) * D;
  std::vector<RequiredTensor> list = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}};
  if (!c.tie_word_embeddings) list.push_back({"lm_head.weight", {V, H}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    list.push_back({p + "input_layernorm.weight", {H}});
    list.push_back({p + "post_attention_layernorm.weight", {H}});
    list.push_back({p + "self_attn.q_proj.weight", {q_rows, H}});
    list.push_back({p + "self_attn.k_proj.weight", {kv_rows, H}});
    list.push_back({p + "self_attn.v_proj.weight", {kv_rows, H}});
    list.push_back({p + "self_attn.o_proj.weight", {H, q_rows}});
    if (qk_norm) {
      list.push_back({p + "self_attn.q_norm.weight", {D}});
      list.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    list.push_back({p + "mlp.gate_proj.weight", {I, H}});
    list.push_back({p + "mlp.up_proj.weight", {I, H}});
    list.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  return list;
}

TEST(RequiredWeights, GoldenDenseCheckpointsAreComplete) {
  for (const auto& [case_name, qk_norm] : std::vector<std::pair<std::string, bool>>{
           {"qwen3-tiny", true}, {"qwen3-tiny-s1", true}, {"qwen3-hd128", true}, {"llama-tiny", false}}) {
    SCOPED_TRACE(case_name);
    ModelConfig config = load_model_config(kGolden / case_name);
    WeightStore store = WeightStore::open(kGolden / case_name);
    std::vector<RequiredTensor> required = dense_required(config, qk_norm);
    EXPECT_NO_THROW(check_required_weights(store, required, DType::BF16));
    EXPECT_EQ(required.size(), store.size()) << "the list covers every stored tensor";
  }
}

TEST(RequiredWeights, ReportsMissingWrongShapeAndWrongDtype) {
  ModelConfig config = load_model_config(kGolden / "qwen3-tiny");
  WeightStore store = WeightStore::open(kGolden / "qwen3-tiny");

  // Tied checkpoint read as untied: lm_head.weight is required but absent.
  ModelConfig untied = config;
  untied.tie_word_embeddings = false;
  std::string message = error_of([&] { check_required_weights(store, dense_required(untied, true), DType::BF16); });
  EXPECT_ERROR_HAS(message, "qwen3-tiny: checkpoint does not match the model (1 problem)");
  EXPECT_ERROR_HAS(message, "tensor 'lm_head.weight' is missing (expected shape [512, 128])");

  // A config claiming head_dim 64: every attention projection and q/k norm is misshapen.
  ModelConfig wrong = config;
  wrong.head_dim = 64;
  message = error_of([&] { check_required_weights(store, dense_required(wrong, true), DType::BF16); });
  EXPECT_ERROR_HAS(message, "tensor 'model.layers.0.self_attn.q_proj.weight': expected shape [256, 128], got [128, 128]");
  EXPECT_ERROR_HAS(message, "(18 problems)");  // 3 layers x (q, k, v, o, q_norm, k_norm)
  EXPECT_EQ(message.find("more"), std::string::npos);

  message = error_of([&] { check_required_weights(store, {{"model.norm.weight", {128}}}, DType::F32); });
  EXPECT_ERROR_HAS(message, "tensor 'model.norm.weight': expected dtype F32, got BF16");

  // Every tensor in the wrong dtype: 35 problems, the first 20 listed.
  message = error_of([&] { check_required_weights(store, dense_required(config, true), DType::F16); });
  EXPECT_ERROR_HAS(message, "(35 problems)");
  EXPECT_ERROR_HAS(message, "and 15 more");
}

}  // namespace
}  // namespace mi::io
