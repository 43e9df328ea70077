// Test-only assembly of the dense decoder forward (Qwen3 / Llama) from the model components, in the layer order
// a generated engine uses:
//   embed -> per layer: input_layernorm -> attention_block (q/k/v proj -> [Qwen3: per-head q_norm / k_norm] ->
//   rotary -> store K/V -> GQA attention over the cache -> o_proj) -> residual -> post_attention_layernorm ->
//   SwiGLU MLP -> residual; final norm -> LM head (tied: embed_tokens).
// Dimensions come from config.json here (the tests cover several models); a generated engine has them constexpr.
// All scratch is taken from one arena at construction: forward() allocates nothing.
#pragma once
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/attention.h"
#include "model/attention_block.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/lm_head.h"
#include "model/rms_norm.h"
#include "model/rotary.h"
#include "model/scratch_arena.h"
#include "model/swiglu_mlp.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace mi_test {

struct DenseLayerWeights {
  const mi::bf16_t *q_proj, *k_proj, *v_proj, *o_proj, *gate_proj, *up_proj, *down_proj;
  std::vector<float> input_norm, post_attention_norm, q_norm, k_norm;  // q_norm/k_norm empty for Llama
};

// A weight of the checkpoint as bf16, with its shape checked.
inline const mi::bf16_t* bf16_weight(const mi::io::WeightStore& store, const std::string& name,
                                     std::vector<int64_t> shape) {
  const mi::io::TensorView& t = store.get(name);
  if (t.dtype != mi::io::DType::BF16) mi::fail(name, ": expected BF16");
  if (t.shape != shape) mi::fail(name, ": unexpected shape");
  return t.as<mi::bf16_t>();
}

template <class K, mi::model::Numerics N>
class DenseModel {
 public:
  using In = mi::model::MatmulInput<N>;

  DenseModel(const std::filesystem::path& dir, int max_context, int threads)
      : config_(mi::io::load_model_config(dir)),
        store_(mi::io::WeightStore::open(dir)),
        pool_(threads),
        rotary_(config_.head_dim, max_context, config_.rope_theta, rope_scaling(config_)),
        cache_({config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, 1, max_context, 16}),
        arena_(plan(config_, max_context, threads).bytes),
        max_context_(max_context) {
    const mi::io::ModelConfig& c = config_;
    const int64_t H = c.hidden_size, D = c.head_dim, nH = c.num_attention_heads, nKV = c.num_key_value_heads,
                  I = c.intermediate_size, V = c.vocab_size;
    qk_norm_ = c.model_type == "qwen3";
    embed_ = bf16_weight(store_, "model.embed_tokens.weight", {V, H});
    lm_head_ = c.tie_word_embeddings ? embed_ : bf16_weight(store_, "lm_head.weight", {V, H});
    final_norm_ = widen("model.norm.weight", H);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      DenseLayerWeights w;
      w.q_proj = bf16_weight(store_, p + "self_attn.q_proj.weight", {nH * D, H});
      w.k_proj = bf16_weight(store_, p + "self_attn.k_proj.weight", {nKV * D, H});
      w.v_proj = bf16_weight(store_, p + "self_attn.v_proj.weight", {nKV * D, H});
      w.o_proj = bf16_weight(store_, p + "self_attn.o_proj.weight", {H, nH * D});
      w.gate_proj = bf16_weight(store_, p + "mlp.gate_proj.weight", {I, H});
      w.up_proj = bf16_weight(store_, p + "mlp.up_proj.weight", {I, H});
      w.down_proj = bf16_weight(store_, p + "mlp.down_proj.weight", {H, I});
      w.input_norm = widen(p + "input_layernorm.weight", H);
      w.post_attention_norm = widen(p + "post_attention_layernorm.weight", H);
      if (qk_norm_) {
        w.q_norm = widen(p + "self_attn.q_norm.weight", D);
        w.k_norm = widen(p + "self_attn.k_norm.weight", D);
      }
      layers_.push_back(std::move(w));
    }
    const std::size_t T = std::size_t(max_context);
    const std::size_t qw = std::size_t(nH * D), kvw = std::size_t(nKV * D), widest = std::size_t(std::max({H, nH * D, I}));
    x_ = arena_.take<float>(T * H);
    h_ = arena_.take<float>(T * H);
    attention_.q_raw = arena_.take<float>(T * qw);
    attention_.q = arena_.take<float>(T * qw);
    attention_.k_raw = arena_.take<float>(T * kvw);
    attention_.k = arena_.take<float>(T * kvw);
    attention_.v = arena_.take<float>(T * kvw);
    attention_.attn = arena_.take<float>(T * qw);
    o_ = arena_.take<float>(T * H);
    attention_.scores = arena_.take<float>(mi::model::attention_scratch_floats(threads, max_context));
    mlp_.gate = arena_.take<float>(T * I);
    mlp_.up = arena_.take<float>(T * I);
    mlp_.act = arena_.take<float>(T * I);
    rounded_ = N == mi::model::Numerics::fast ? arena_.take<In>(T * widest) : nullptr;
    attention_.rounded = rounded_;
    mlp_.x_rounded = rounded_;
    mlp_.act_rounded = rounded_;  // x is consumed (gate/up done) before act is rounded
    seq_ = cache_.allocate_sequence();
  }

  const mi::io::ModelConfig& config() const { return config_; }
  const mi::io::WeightStore& store() const { return store_; }
  int position() const { return cache_.length(seq_); }
  void reset() { cache_.clear_sequence(seq_); }

  // Runs T new tokens on top of the cache. logits: [T, vocab] when all_rows, else [1, vocab] for the last token.
  void forward(const int* ids, int T, float* logits, bool all_rows) {
    const mi::io::ModelConfig& c = config_;
    const int H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    const float eps = float(c.rms_norm_eps);
    const mi::model::AttentionDims dims{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    const int start = cache_.append(seq_, T);
    mi::model::embed_tokens(embed_, V, H, ids, T, x_);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const DenseLayerWeights& w = layers_[std::size_t(l)];
      mi::model::rms_norm_rows<K>(pool_, x_, w.input_norm.data(), h_, T, H, eps);
      const mi::model::AttentionWeights<mi::bf16_t> aw{w.q_proj, w.k_proj, w.v_proj, w.o_proj,
                                                       qk_norm_ ? w.q_norm.data() : nullptr,
                                                       qk_norm_ ? w.k_norm.data() : nullptr};
      // The family is a runtime value here (one test binary, several models); an engine fixes kQkNorm.
      if (qk_norm_)
        mi::model::attention_block<K, N, true>(pool_, cache_, seq_, l, dims, rotary_, aw, H, eps, h_, T, start, o_,
                                               attention_);
      else
        mi::model::attention_block<K, N, false>(pool_, cache_, seq_, l, dims, rotary_, aw, H, eps, h_, T, start, o_,
                                                attention_);
      K::add(o_, x_, T * H);
      mi::model::rms_norm_rows<K>(pool_, x_, w.post_attention_norm.data(), h_, T, H, eps);
      mi::model::swiglu_mlp<K, N>(pool_, w.gate_proj, w.up_proj, w.down_proj, H, I, h_, T, o_, mlp_);
      K::add(o_, x_, T * H);
    }
    const int first_row = all_rows ? 0 : T - 1, rows = T - first_row;
    mi::model::rms_norm_rows<K>(pool_, x_ + std::size_t(first_row) * H, final_norm_.data(), h_, rows, H, eps);
    const In* hin = mi::model::matmul_input<K, N>(pool_, h_, std::size_t(rows) * H, rounded_);
    mi::model::lm_head<K>(pool_, lm_head_, V, H, hin, rows, logits);
  }

 private:
  static std::optional<mi::model::Llama3RopeScaling> rope_scaling(const mi::io::ModelConfig& c) {
    if (!c.rope_scaling) return std::nullopt;
    if (c.rope_scaling->rope_type != "llama3") mi::fail("unsupported rope_type ", c.rope_scaling->rope_type);
    return mi::model::Llama3RopeScaling{c.rope_scaling->factor, c.rope_scaling->low_freq_factor,
                                        c.rope_scaling->high_freq_factor,
                                        c.rope_scaling->original_max_position_embeddings};
  }

  static mi::model::ScratchPlan plan(const mi::io::ModelConfig& c, int max_context, int threads) {
    const std::size_t T = std::size_t(max_context), H = std::size_t(c.hidden_size),
                      qw = std::size_t(c.num_attention_heads) * c.head_dim,
                      kvw = std::size_t(c.num_key_value_heads) * c.head_dim, I = std::size_t(c.intermediate_size);
    mi::model::ScratchPlan p;
    p.add<float>(T * H).add<float>(T * H).add<float>(T * qw).add<float>(T * qw);
    p.add<float>(T * kvw).add<float>(T * kvw).add<float>(T * kvw).add<float>(T * qw).add<float>(T * H);
    p.add<float>(mi::model::attention_scratch_floats(threads, max_context));
    p.add<float>(T * I).add<float>(T * I).add<float>(T * I);
    if (N == mi::model::Numerics::fast) p.add<In>(T * std::max({H, qw, I}));
    return p;
  }

  std::vector<float> widen(const std::string& name, int64_t n) {
    return mi::model::widen_norm_weight(bf16_weight(store_, name, {n}), int(n));
  }

  mi::io::ModelConfig config_;
  mi::io::WeightStore store_;
  mi::runtime::ThreadPool pool_;
  mi::model::RotaryTable rotary_;
  mi::runtime::KvCache cache_;
  mi::model::ScratchArena arena_;
  int max_context_;
  int seq_ = 0;
  bool qk_norm_ = false;
  const mi::bf16_t* embed_ = nullptr;
  const mi::bf16_t* lm_head_ = nullptr;
  std::vector<float> final_norm_;
  std::vector<DenseLayerWeights> layers_;
  float *x_, *h_, *o_;
  mi::model::AttentionScratch<N> attention_{};
  In* rounded_;
  mi::model::MlpScratch<N> mlp_{};
};

}  // namespace mi_test
