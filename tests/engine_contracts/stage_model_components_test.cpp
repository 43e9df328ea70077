// Test contract, stage model_components (ckb/contracts/rmsnorm, rotary_embedding, gqa_attention, swiglu_mlp,
// embedding, lm_head): each component at this model's dimensions against a double-precision reference written out
// here from the contract's formula.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine_config.h"
#include "model.h"
#include "model/attention.h"
#include "model/embedding.h"
#include "model/lm_head.h"
#include "model/rms_norm.h"
#include "model/rotary.h"
#include "model/swiglu_mlp.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"
#include "stage_test_support.h"

namespace {
using K = engine::Model::K;
using namespace engine::config;
constexpr mi::model::Numerics kPrecise = mi::model::Numerics::precise;

double rel_tol(double v, double t = 1e-4) { return t * (1.0 + std::fabs(v)); }

TEST(ModelComponents, RmsNormRowsUseTheMeanOfSquares) {
  mi::runtime::ThreadPool pool(kThreads);
  const int rows = 3;
  const auto x = stage::random_floats(std::size_t(rows) * kHidden, 41, 2.0f);
  const auto w = stage::random_floats(std::size_t(kHidden), 42, 1.5f);
  std::vector<float> y(x.size());
  mi::model::rms_norm_rows<K>(pool, x.data(), w.data(), y.data(), rows, kHidden, kRmsNormEps);
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < kHidden; ++i) ss += double(x[std::size_t(r) * kHidden + i]) * x[std::size_t(r) * kHidden + i];
    const double inv = 1.0 / std::sqrt(ss / kHidden + double(kRmsNormEps));
    for (int i = 0; i < kHidden; ++i) {
      const std::size_t k = std::size_t(r) * kHidden + i;
      ASSERT_NEAR(y[k], w[std::size_t(i)] * x[k] * inv, rel_tol(y[k])) << "row " << r << " element " << i;
    }
  }
}

TEST(ModelComponents, RotaryAnglesArePositionTimesInverseFrequency) {
  const int positions = std::min(kMaxContext, 64);
  mi::model::RotaryTable table(kHeadDim, positions, kRopeTheta, std::nullopt);
  for (int p : {0, 1, positions - 1})
    for (int i = 0; i < kHeadDim / 2; ++i) {
      const double inv_freq = std::pow(kRopeTheta, -2.0 * i / kHeadDim);
      // The contract computes the angle as an f32 product (as the HF reference does): allow its rounding,
      // |angle| * 2^-23, plus f32 rounding of cos/sin.
      const double tol = std::fabs(p * inv_freq) * 0x1.0p-23 + 1e-6;
      ASSERT_NEAR(table.cos(p)[i], std::cos(p * inv_freq), tol) << "position " << p << " pair " << i;
      ASSERT_NEAR(table.sin(p)[i], std::sin(p * inv_freq), tol) << "position " << p << " pair " << i;
    }
}

// Causal GQA over the KV cache: prefill of T tokens, then one decode token, against a double-precision
// attention with the 1/sqrt(head_dim) scale applied exactly once (failure mode BUG-005-3).
TEST(ModelComponents, AttentionPrefillThenDecodeMatchesReference) {
  mi::runtime::ThreadPool pool(kThreads);
  const int T = 6, total = T + 1, qw = kHeads * kHeadDim, kvw = kKvHeads * kHeadDim;
  const int context = std::max(16, kKvBlockSize * 2);
  mi::runtime::KvCache cache({1, kKvHeads, kHeadDim, 1, context, kKvBlockSize});
  const int seq = cache.allocate_sequence();
  const auto q = stage::random_floats(std::size_t(total) * qw, 51);
  const auto k = stage::random_floats(std::size_t(total) * kvw, 52);
  const auto v = stage::random_floats(std::size_t(total) * kvw, 53);
  std::vector<float> out(std::size_t(total) * qw), scores(mi::model::attention_scratch_floats(kThreads, context));
  const mi::model::AttentionDims dims{kHeads, kKvHeads, kHeadDim};
  // prefill
  int start = cache.append(seq, T);
  mi::model::store_kv<K>(cache, seq, 0, start, T, k.data(), v.data(), kKvHeads, kHeadDim);
  mi::model::causal_attention<K>(pool, cache, seq, 0, dims, q.data(), T, start, out.data(), scores.data());
  // decode one token
  start = cache.append(seq, 1);
  ASSERT_EQ(start, T);
  ASSERT_EQ(cache.length(seq), total);  // kv_len grows by exactly the tokens appended (BUG-KVLEN)
  mi::model::store_kv<K>(cache, seq, 0, start, 1, k.data() + std::size_t(T) * kvw, v.data() + std::size_t(T) * kvw, kKvHeads, kHeadDim);
  mi::model::causal_attention<K>(pool, cache, seq, 0, dims, q.data() + std::size_t(T) * qw, 1, start,
                                 out.data() + std::size_t(T) * qw, scores.data());

  const int group = kHeads / kKvHeads;
  const double scale = 1.0 / std::sqrt(double(kHeadDim));
  for (int t = 0; t < total; ++t)
    for (int h = 0; h < kHeads; ++h) {
      const int kv = h / group;
      std::vector<double> s(std::size_t(t + 1));
      double mx = -1e300;
      for (int j = 0; j <= t; ++j) {
        double dot = 0;
        for (int d = 0; d < kHeadDim; ++d)
          dot += double(q[std::size_t(t) * qw + h * kHeadDim + d]) * k[std::size_t(j) * kvw + kv * kHeadDim + d];
        s[std::size_t(j)] = dot * scale;
        mx = std::max(mx, s[std::size_t(j)]);
      }
      double z = 0;
      for (auto& e : s) z += (e = std::exp(e - mx));
      for (int d = 0; d < kHeadDim; ++d) {
        double o = 0;
        for (int j = 0; j <= t; ++j) o += s[std::size_t(j)] / z * v[std::size_t(j) * kvw + kv * kHeadDim + d];
        ASSERT_NEAR(out[std::size_t(t) * qw + h * kHeadDim + d], o, 1e-4) << "token " << t << " head " << h << " dim " << d;
      }
    }
}

TEST(ModelComponents, SwigluMlpMatchesReference) {
  mi::runtime::ThreadPool pool(kThreads);
  const int M = 2;
  const auto gate = stage::to_bf16(stage::random_floats(std::size_t(kIntermediate) * kHidden, 61, 0.1f));
  const auto up = stage::to_bf16(stage::random_floats(std::size_t(kIntermediate) * kHidden, 62, 0.1f));
  const auto down = stage::to_bf16(stage::random_floats(std::size_t(kHidden) * kIntermediate, 63, 0.1f));
  const auto x = stage::random_floats(std::size_t(M) * kHidden, 64);
  std::vector<float> out(std::size_t(M) * kHidden), g(std::size_t(M) * kIntermediate), u(g.size()), a(g.size());
  mi::model::MlpScratch<kPrecise> scratch{g.data(), u.data(), a.data(), nullptr, nullptr};
  mi::model::swiglu_mlp<K, kPrecise>(pool, gate.data(), up.data(), down.data(), kHidden, kIntermediate, x.data(), M, out.data(), scratch);
  for (int m = 0; m < M; ++m) {
    std::vector<double> act(static_cast<std::size_t>(kIntermediate));
    for (int i = 0; i < kIntermediate; ++i) {
      double gi = 0, ui = 0;
      for (int c = 0; c < kHidden; ++c) {
        gi += stage::widen(gate[std::size_t(i) * kHidden + c]) * x[std::size_t(m) * kHidden + c];
        ui += stage::widen(up[std::size_t(i) * kHidden + c]) * x[std::size_t(m) * kHidden + c];
      }
      act[std::size_t(i)] = gi / (1 + std::exp(-gi)) * ui;
    }
    for (int r = 0; r < kHidden; ++r) {
      double o = 0;
      for (int i = 0; i < kIntermediate; ++i) o += stage::widen(down[std::size_t(r) * kIntermediate + i]) * act[std::size_t(i)];
      ASSERT_NEAR(out[std::size_t(m) * kHidden + r], o, rel_tol(o, 1e-3)) << "token " << m << " row " << r;
    }
  }
}

TEST(ModelComponents, EmbeddingAndLmHeadMatchReference) {
  mi::runtime::ThreadPool pool(kThreads);
  const int V = std::min(kVocabSize, 512);
  const auto table = stage::to_bf16(stage::random_floats(std::size_t(V) * kHidden, 71, 0.5f));
  const int ids[3] = {0, V / 2, V - 1};
  std::vector<float> x(std::size_t(3) * kHidden);
  mi::model::embed_tokens(table.data(), V, kHidden, ids, 3, x.data());
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < kHidden; ++i)
      ASSERT_EQ(x[std::size_t(t) * kHidden + i], mi::bf16_to_f32(table[std::size_t(ids[t]) * kHidden + i]));
  std::vector<float> logits(static_cast<std::size_t>(V));
  mi::model::lm_head<K>(pool, table.data(), V, kHidden, x.data() + 2 * kHidden, 1, logits.data());
  std::vector<double> ref, abs_sum;
  stage::matvec_reference(table.data(), x.data() + 2 * kHidden, V, kHidden, ref, abs_sum);
  for (int r = 0; r < V; ++r) ASSERT_NEAR(logits[std::size_t(r)], ref[std::size_t(r)], stage::f32_sum_bound(kHidden, abs_sum[std::size_t(r)]));
  EXPECT_EQ(mi::model::greedy_token(logits.data(), V), int(std::max_element(ref.begin(), ref.end()) - ref.begin()));
}

}  // namespace
