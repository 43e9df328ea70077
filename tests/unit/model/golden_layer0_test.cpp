// Each component on real checkpoint weights: layer 0 of qwen3-tiny, qwen3-hd128 (head_dim 128, GQA 4:1) and
// llama-tiny, run on the embedded p1 prompt (10 tokens). Every stage is compared with a double-precision loop
// fed the same f32 input the component got, so a failure names the component.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/attention.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/rms_norm.h"
#include "model/rotary.h"
#include "model/swiglu_mlp.h"
#include "runtime/kv_cache.h"
#include "kernel_levels.h"
#include "test_util.h"

using mi::model::Numerics;

namespace {

template <class K>
class GoldenLayer0 : public ::testing::Test {};
TYPED_TEST_SUITE(GoldenLayer0, mi_test::KernelLevels, mi_test::KernelLevelName);

// |got - want| <= rel * max|want| over the whole tensor (these activations have no tiny-but-meaningful entries).
void expect_close(const float* got, const std::vector<double>& want, double rel, const char* stage) {
  double scale = 0, worst = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  EXPECT_LE(worst, rel * scale) << stage << ": max error " << worst << " at scale " << scale;
}

std::vector<float> head_rms_norm_out(const std::vector<float>& x, const std::vector<float>& w, int rows, int heads,
                                     int d, double eps, std::vector<double>& ref) {
  ref.clear();
  for (int s = 0; s < rows * heads; ++s) {
    const auto r = mi_test::reference_rms_norm(x.data() + std::size_t(s) * d, w.data(), d, eps);
    ref.insert(ref.end(), r.begin(), r.end());
  }
  return std::vector<float>(ref.size());
}

std::vector<double> reference_rope(const std::vector<float>& x, int rows, int heads, int d, double theta) {
  std::vector<double> out(x.begin(), x.end());
  const int half = d / 2;
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const std::size_t o = (std::size_t(t) * heads + h) * d;
        const double angle = t * std::pow(theta, -2.0 * i / d), a = x[o + i], b = x[o + i + half];
        out[o + i] = a * std::cos(angle) - b * std::sin(angle);
        out[o + i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
  return out;
}

TYPED_TEST(GoldenLayer0, EveryComponentMatchesDoubleOnRealWeights) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  for (const char* name : {"qwen3-tiny", "qwen3-hd128", "llama-tiny"}) {
    SCOPED_TRACE(name);
    const auto dir = std::filesystem::path(METAINFER_TEST_DATA) / "golden" / name;
    const mi::io::ModelConfig c = mi::io::load_model_config(dir);
    const mi::io::WeightStore store = mi::io::WeightStore::open(dir);
    std::ifstream trace_in(dir / "trace.json");
    const auto ids = nlohmann::json::parse(trace_in).at("prompts").at(1).at("prompt_ids").get<std::vector<int>>();
    const int T = int(ids.size()), H = c.hidden_size, D = c.head_dim, nH = c.num_attention_heads,
              nKV = c.num_key_value_heads, I = c.intermediate_size, V = c.vocab_size;
    const double eps = c.rms_norm_eps;
    const bool qk_norm = c.model_type == "qwen3";
    auto w = [&](const std::string& n, std::vector<int64_t> shape) {
      return mi_test::bf16_weight(store, "model.layers.0." + n + ".weight", shape);
    };
    auto norm = [&](const std::string& n, int len) { return mi::model::widen_norm_weight(w(n, {len}), len); };
    mi::runtime::ThreadPool pool(2);
    std::vector<double> ref, mag;

    // embedding
    const mi::bf16_t* embed = mi_test::bf16_weight(store, "model.embed_tokens.weight", {V, H});
    std::vector<float> x(std::size_t(T) * H);
    mi::model::embed_tokens(embed, V, H, ids.data(), T, x.data());
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < H; ++i) ASSERT_EQ(x[std::size_t(t) * H + i], mi::bf16_to_f32(embed[std::size_t(ids[t]) * H + i]));

    // input_layernorm
    const auto in_norm = norm("input_layernorm", H);
    std::vector<float> h(x.size());
    mi::model::rms_norm_rows<K>(pool, x.data(), in_norm.data(), h.data(), T, H, float(eps));
    ref.clear();
    for (int t = 0; t < T; ++t) {
      const auto r = mi_test::reference_rms_norm(x.data() + std::size_t(t) * H, in_norm.data(), H, eps);
      ref.insert(ref.end(), r.begin(), r.end());
    }
    expect_close(h.data(), ref, 2e-6, "input_layernorm");

    // q/k/v projections
    std::vector<float> q(std::size_t(T) * nH * D), k(std::size_t(T) * nKV * D), v(k.size());
    struct Proj { const char* name; int rows; std::vector<float>* out; } projs[] = {
        {"self_attn.q_proj", nH * D, &q}, {"self_attn.k_proj", nKV * D, &k}, {"self_attn.v_proj", nKV * D, &v}};
    for (const Proj& p : projs) {
      const mi::bf16_t* W = w(p.name, {p.rows, H});
      mi::model::linear<K>(pool, W, p.rows, H, h.data(), T, p.out->data());
      mi_test::reference_linear(W, p.rows, H, h.data(), T, ref, mag);
      expect_close(p.out->data(), ref, 1e-5, p.name);
    }

    // Qwen3 per-head q_norm / k_norm
    if (qk_norm) {
      const auto qn = norm("self_attn.q_norm", D), kn = norm("self_attn.k_norm", D);
      std::vector<float> q2 = head_rms_norm_out(q, qn, T, nH, D, eps, ref);
      mi::model::head_rms_norm<K>(pool, q.data(), qn.data(), q2.data(), T, nH, D, float(eps));
      expect_close(q2.data(), ref, 2e-6, "q_norm");
      std::vector<float> k2 = head_rms_norm_out(k, kn, T, nKV, D, eps, ref);
      mi::model::head_rms_norm<K>(pool, k.data(), kn.data(), k2.data(), T, nKV, D, float(eps));
      expect_close(k2.data(), ref, 2e-6, "k_norm");
      q = q2;
      k = k2;
    }

    // rotary at positions 0..T-1
    const mi::model::RotaryTable rotary(D, 64, c.rope_theta, std::nullopt);
    ref = reference_rope(q, T, nH, D, c.rope_theta);
    mi::model::apply_rotary<K>(pool, rotary, q.data(), T, std::size_t(nH) * D, nH, D, 0);
    expect_close(q.data(), ref, 2e-6, "rotary q");
    ref = reference_rope(k, T, nKV, D, c.rope_theta);
    mi::model::apply_rotary<K>(pool, rotary, k.data(), T, std::size_t(nKV) * D, nKV, D, 0);
    expect_close(k.data(), ref, 2e-6, "rotary k");

    // attention over the cache
    mi::runtime::KvCache cache({1, nKV, D, 1, 64, 4});
    const int seq = cache.allocate_sequence();
    cache.append(seq, T);
    mi::model::store_kv<K>(cache, seq, 0, 0, T, k.data(), v.data(), nKV, D);
    std::vector<float> attn(q.size()), scores(mi::model::attention_scratch_floats(pool.size(), 64));
    mi::model::causal_attention<K>(pool, cache, seq, 0, {nH, nKV, D}, q.data(), T, 0, attn.data(), scores.data());
    expect_close(attn.data(), mi_test::reference_attention(q, k, v, T, nH, nKV, D), 1e-5, "attention");

    // o_proj, residual, post_attention_layernorm
    const mi::bf16_t* Wo = w("self_attn.o_proj", {H, nH * D});
    std::vector<float> o(x.size());
    mi::model::linear<K>(pool, Wo, H, nH * D, attn.data(), T, o.data());
    mi_test::reference_linear(Wo, H, nH * D, attn.data(), T, ref, mag);
    expect_close(o.data(), ref, 1e-5, "o_proj");
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const auto post_norm = norm("post_attention_layernorm", H);
    mi::model::rms_norm_rows<K>(pool, x.data(), post_norm.data(), h.data(), T, H, float(eps));

    // SwiGLU MLP
    const mi::bf16_t* Wg = w("mlp.gate_proj", {I, H});
    const mi::bf16_t* Wu = w("mlp.up_proj", {I, H});
    const mi::bf16_t* Wd = w("mlp.down_proj", {H, I});
    std::vector<float> g(std::size_t(T) * I), u(g.size()), a(g.size()), out(x.size());
    mi::model::swiglu_mlp<K, Numerics::precise>(pool, Wg, Wu, Wd, H, I, h.data(), T, out.data(),
                                                {g.data(), u.data(), a.data(), nullptr, nullptr});
    std::vector<double> gr, ur;
    mi_test::reference_linear(Wg, I, H, h.data(), T, gr, mag);
    mi_test::reference_linear(Wu, I, H, h.data(), T, ur, mag);
    std::vector<float> act(gr.size());
    for (std::size_t i = 0; i < gr.size(); ++i) act[i] = float(gr[i] / (1 + std::exp(-gr[i])) * ur[i]);
    mi_test::reference_linear(Wd, H, I, act.data(), T, ref, mag);
    expect_close(out.data(), ref, 1e-5, "mlp");
  }
}

}  // namespace
