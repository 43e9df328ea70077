// model/gated_delta_rule.h: the recurrent form against a plain scalar reference of the recurrence (double), the
// chunked (UT transform) form against the recurrent one on a 150-token sequence (several chunk sizes, including
// ones that do not divide T, from a zero and from a non-zero state), batched decode, and the input helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernel_levels.h"
#include "model/gated_delta_rule.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::model::GatedDeltaDims;
using mi::model::GatedDeltaInputs;
using mi::runtime::ThreadPool;

template <class K>
class GatedDeltaLevels : public ::testing::Test {};
TYPED_TEST_SUITE(GatedDeltaLevels, mi_test::KernelLevels, mi_test::KernelLevelName);

namespace {

// Random inputs for T tokens, prepared as a layer would: q/k L2-normalised (q also scaled by 1/sqrt(dk)), beta and
// g from gated_delta_gates. Two value heads decay fast (A_log ~ 0: g ~ -0.7 per token), the others slowly
// (A_log = -4: g ~ -0.01), so both regimes are covered. q, k, v live in one row with stride `ld` (a view of one
// projection output).
struct DeltaData {
  GatedDeltaDims d;
  int T = 0;
  std::size_t ld = 0;
  std::vector<float> qkv;   // [T, ld]: q | k | v
  std::vector<float> beta;  // [T, v_heads]
  std::vector<float> g;     // [T, v_heads]
  GatedDeltaInputs inputs(int t0 = 0) const {
    const std::size_t qk = std::size_t(d.k_heads) * d.k_dim;
    const float* row = qkv.data() + std::size_t(t0) * ld;
    return {.q = row, .ldq = ld, .k = row + qk, .ldk = ld, .v = row + 2 * qk, .ldv = ld,
            .beta = beta.data() + std::size_t(t0) * d.v_heads, .g = g.data() + std::size_t(t0) * d.v_heads};
  }
};

DeltaData make_data(const GatedDeltaDims& d, int T, unsigned seed) {
  DeltaData r;
  r.d = d;
  r.T = T;
  const std::size_t qk = std::size_t(d.k_heads) * d.k_dim;
  r.ld = 2 * qk + std::size_t(d.v_heads) * d.v_dim + 3;  // + 3: padding, so strides are exercised
  r.qkv = mi_test::random_floats(std::size_t(T) * r.ld, seed);
  ThreadPool pool(2);
  mi::model::l2_normalize_heads(pool, r.qkv.data(), T, r.ld, d.k_heads, d.k_dim, 1e-6f,
                                float(1.0 / std::sqrt(double(d.k_dim))));
  mi::model::l2_normalize_heads(pool, r.qkv.data() + qk, T, r.ld, d.k_heads, d.k_dim, 1e-6f, 1.0f);
  const auto b = mi_test::random_floats(std::size_t(T) * d.v_heads, seed + 1);
  const auto a = mi_test::random_floats(std::size_t(T) * d.v_heads, seed + 2);
  std::vector<float> A_log(std::size_t(d.v_heads)), dt_bias(std::size_t(d.v_heads), 0.1f);
  for (int h = 0; h < d.v_heads; ++h) A_log[std::size_t(h)] = h < 2 ? 0.0f : -4.0f;
  r.beta.resize(std::size_t(T) * d.v_heads);
  r.g.resize(r.beta.size());
  mi::model::gated_delta_gates(b.data(), d.v_heads, a.data(), d.v_heads, A_log.data(), dt_bias.data(), T, d.v_heads,
                               r.beta.data(), r.g.data());
  return r;
}

// The recurrence exactly as written in the paper, in double, one head at a time:
//   S = exp(g) S;  kv = S^T k;  delta = beta (v - kv);  S += k delta^T;  o = S^T q
// state [v_heads, dv, dk] (S transposed, as the component stores it) in/out; returns o [T, v_heads * dv].
std::vector<double> reference_recurrent(const DeltaData& x, std::vector<double>& state) {
  const auto& d = x.d;
  const int dk = d.k_dim, dv = d.v_dim, group = d.v_heads / d.k_heads;
  const std::size_t qk = std::size_t(d.k_heads) * dk;
  std::vector<double> out(std::size_t(x.T) * d.v_heads * dv);
  for (int h = 0; h < d.v_heads; ++h) {
    double* S = state.data() + std::size_t(h) * dk * dv;
    for (int t = 0; t < x.T; ++t) {
      const float* row = x.qkv.data() + std::size_t(t) * x.ld;
      const float* q = row + std::size_t(h / group) * dk;
      const float* k = row + qk + std::size_t(h / group) * dk;
      const float* v = row + 2 * qk + std::size_t(h) * dv;
      const double beta = x.beta[std::size_t(t) * d.v_heads + h], g = x.g[std::size_t(t) * d.v_heads + h];
      for (int i = 0; i < dk * dv; ++i) S[i] *= std::exp(g);
      for (int j = 0; j < dv; ++j) {
        double kv = 0;
        for (int i = 0; i < dk; ++i) kv += S[std::size_t(j) * dk + i] * k[i];
        const double delta = beta * (v[j] - kv);
        for (int i = 0; i < dk; ++i) S[std::size_t(j) * dk + i] += k[i] * delta;
      }
      for (int j = 0; j < dv; ++j) {
        double o = 0;
        for (int i = 0; i < dk; ++i) o += S[std::size_t(j) * dk + i] * q[i];
        out[(std::size_t(t) * d.v_heads + h) * dv + j] = o;
      }
    }
  }
  return out;
}

// max |a - b| / max |b|: the error relative to the tensor's scale.
template <class A, class B>
double scaled_max_diff(const A& a, const B& b) {
  double diff = 0, mag = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    mag = std::max(mag, std::fabs(double(b[i])));
  }
  return diff / std::max(mag, 1e-30);
}

const GatedDeltaDims kTiny{.k_heads = 2, .v_heads = 4, .k_dim = 16, .v_dim = 16};  // qwen3_5-tiny's linear layers
const GatedDeltaDims kWide{.k_heads = 1, .v_heads = 3, .k_dim = 64, .v_dim = 40};

}  // namespace

TYPED_TEST(GatedDeltaLevels, RecurrentMatchesScalarReference) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(3);
  for (const GatedDeltaDims& d : {kTiny, kWide}) {
    const DeltaData x = make_data(d, 40, 31);
    std::vector<float> state(mi::model::gated_delta_state_floats(d), 0.0f);
    std::vector<float> out(std::size_t(x.T) * d.v_heads * d.v_dim);
    mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(), x.T, state.data(), out.data(),
                                             std::size_t(d.v_heads) * d.v_dim);
    std::vector<double> ref_state(state.size(), 0.0);
    const auto ref = reference_recurrent(x, ref_state);
    EXPECT_LT(scaled_max_diff(out, ref), 2e-6);
    EXPECT_LT(scaled_max_diff(state, ref_state), 2e-6);
  }
}

// The acceptance test of the chunked form: chunked == recurrent within f32 rounding on 150 tokens.
TYPED_TEST(GatedDeltaLevels, ChunkedMatchesRecurrent) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(3);
  double worst_out = 0, worst_state = 0;
  for (const GatedDeltaDims& d : {kTiny, kWide}) {
    const int T = 150, warm = 23;
    const DeltaData x = make_data(d, warm + T, 41);
    const std::size_t ldo = std::size_t(d.v_heads) * d.v_dim;
    for (bool nonzero_start : {false, true}) {
      // Start state: zero, or the state after `warm` tokens (then the 150 tokens that follow are compared).
      std::vector<float> start(mi::model::gated_delta_state_floats(d), 0.0f);
      std::vector<float> warm_out(std::size_t(warm) * ldo);
      if (nonzero_start) mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(), warm, start.data(), warm_out.data(), ldo);
      const int t0 = nonzero_start ? warm : 0;

      std::vector<float> rec_state = start, rec_out(std::size_t(T) * ldo);
      mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(t0), T, rec_state.data(), rec_out.data(), ldo);
      for (int C : {1, 7, 16, 32, 64, 150, 256}) {
        std::vector<float> state = start, out(std::size_t(T) * ldo, -1.0f);
        std::vector<float> scratch(mi::model::gated_delta_chunked_scratch_floats(d, C, pool.size()));
        mi::model::gated_delta_rule_chunked<K>(pool, d, x.inputs(t0), T, C, state.data(), out.data(), ldo,
                                               scratch.data());
        const double e_out = scaled_max_diff(out, rec_out), e_state = scaled_max_diff(state, rec_state);
        worst_out = std::max(worst_out, e_out);
        worst_state = std::max(worst_state, e_state);
        EXPECT_LT(e_out, 1e-4) << "C=" << C << " dk=" << d.k_dim << " nonzero start " << nonzero_start;
        EXPECT_LT(e_state, 1e-4) << "C=" << C << " dk=" << d.k_dim << " nonzero start " << nonzero_start;
      }
    }
  }
  std::printf("[ %s ] chunked vs recurrent, max |diff| / max |recurrent|: output %.3g, state %.3g\n", K::name,
              worst_out, worst_state);
}

// Extreme gates: no decay (g = 0) next to a decay that underflows exp(G) within a few tokens (g = -30), beta near
// 0 and near 1, and repeated keys (the delta rule overwriting the same slot). Chunked must stay finite and agree.
TYPED_TEST(GatedDeltaLevels, ChunkedMatchesRecurrentAtExtremeGates) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const GatedDeltaDims d = kTiny;
  const int T = 100;
  DeltaData x = make_data(d, T, 55);
  const std::size_t qk = std::size_t(d.k_heads) * d.k_dim;
  for (int t = 0; t < T; ++t) {
    if (t % 3 == 1)  // every third token repeats the previous token's keys
      for (std::size_t i = 0; i < qk; ++i) x.qkv[std::size_t(t) * x.ld + qk + i] = x.qkv[std::size_t(t - 1) * x.ld + qk + i];
    for (int h = 0; h < d.v_heads; ++h) {
      x.g[std::size_t(t) * d.v_heads + h] = h == 0 ? 0.0f : h == 1 ? -30.0f : (t % 2 ? 0.0f : -5.0f);
      x.beta[std::size_t(t) * d.v_heads + h] = (t + h) % 2 ? 0.999f : 1e-3f;
    }
  }
  const std::size_t ldo = std::size_t(d.v_heads) * d.v_dim;
  std::vector<float> s_rec(mi::model::gated_delta_state_floats(d), 0.0f), o_rec(std::size_t(T) * ldo);
  mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(), T, s_rec.data(), o_rec.data(), ldo);
  for (int C : {16, 64}) {
    std::vector<float> s(s_rec.size(), 0.0f), o(o_rec.size());
    std::vector<float> scratch(mi::model::gated_delta_chunked_scratch_floats(d, C, pool.size()));
    mi::model::gated_delta_rule_chunked<K>(pool, d, x.inputs(), T, C, s.data(), o.data(), ldo, scratch.data());
    for (float v : o) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(scaled_max_diff(o, o_rec), 1e-4) << "C=" << C;
    EXPECT_LT(scaled_max_diff(s, s_rec), 1e-4) << "C=" << C;
  }
}

// Prefill in chunks, then decode: the chunked form leaves the state exactly where decode continues from.
TYPED_TEST(GatedDeltaLevels, ChunkedPrefillThenRecurrentDecodeMatchesAllRecurrent) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const GatedDeltaDims d = kTiny;
  const int P = 70, T = 80;
  const DeltaData x = make_data(d, T, 51);
  const std::size_t ldo = std::size_t(d.v_heads) * d.v_dim;
  std::vector<float> s_rec(mi::model::gated_delta_state_floats(d), 0.0f), s_mix = s_rec;
  std::vector<float> o_rec(std::size_t(T) * ldo), o_mix(o_rec.size());
  mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(), T, s_rec.data(), o_rec.data(), ldo);
  std::vector<float> scratch(mi::model::gated_delta_chunked_scratch_floats(d, 64, pool.size()));
  mi::model::gated_delta_rule_chunked<K>(pool, d, x.inputs(), P, 64, s_mix.data(), o_mix.data(), ldo, scratch.data());
  for (int t = P; t < T; ++t)
    mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(t), 1, s_mix.data(), o_mix.data() + std::size_t(t) * ldo, ldo);
  EXPECT_LT(scaled_max_diff(o_mix, o_rec), 1e-4);
  EXPECT_LT(scaled_max_diff(s_mix, s_rec), 1e-4);
}

TYPED_TEST(GatedDeltaLevels, DecodeBatchEqualsOneSequenceAtATime) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(3);
  const GatedDeltaDims d = kTiny;
  const int B = 3;
  const DeltaData x = make_data(d, B, 61);
  const std::size_t ldo = std::size_t(d.v_heads) * d.v_dim;
  std::vector<std::vector<float>> sa;
  for (int b = 0; b < B; ++b) sa.push_back(mi_test::random_floats(mi::model::gated_delta_state_floats(d), 62 + b, 0.3f));
  auto sb = sa;
  std::vector<float*> ptrs;
  for (auto& s : sa) ptrs.push_back(s.data());
  std::vector<float> ya(std::size_t(B) * ldo), yb(ya.size());
  mi::model::gated_delta_rule_decode_batch<K>(pool, d, x.inputs(), B, ptrs.data(), ya.data(), ldo);
  for (int b = 0; b < B; ++b)
    mi::model::gated_delta_rule_recurrent<K>(pool, d, x.inputs(b), 1, sb[b].data(), yb.data() + std::size_t(b) * ldo, ldo);
  EXPECT_EQ(ya, yb);
  EXPECT_EQ(sa, sb);
}

// L2 normalisation divides by sqrt(SUM of squares + eps) (BUG-005-1), then scales; gates follow their formulas.
TEST(GatedDeltaInputs, L2NormalizeUsesTheSumOfSquares) {
  ThreadPool pool(2);
  const int rows = 3, heads = 2, dim = 16;
  const std::size_t ld = heads * dim + 5;
  const auto x0 = mi_test::random_floats(rows * ld, 71, 3.0f);
  auto x = x0;
  mi::model::l2_normalize_heads(pool, x.data(), rows, ld, heads, dim, 1e-6f, 0.25f);
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const std::size_t off = std::size_t(r) * ld + std::size_t(h) * dim;
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += double(x0[off + i]) * x0[off + i];
      for (int i = 0; i < dim; ++i)
        ASSERT_NEAR(x[off + i], x0[off + i] / std::sqrt(ss + 1e-6) * 0.25, 1e-6);
    }
    for (std::size_t i = std::size_t(heads) * dim; i < ld; ++i)  // padding untouched
      ASSERT_EQ(x[std::size_t(r) * ld + i], x0[std::size_t(r) * ld + i]);
  }
}

TEST(GatedDeltaInputs, BetaIsSigmoidAndGIsMinusExpALogTimesSoftplus) {
  const int T = 2, H = 3;
  const float b[] = {0.0f, 2.0f, -3.0f, 1.0f, -1.0f, 30.0f};
  const float a[] = {0.0f, 40.0f, -40.0f, 1.5f, -2.0f, 0.3f};  // softplus far into both tails
  const float A_log[] = {0.0f, -1.0f, 0.7f}, dt_bias[] = {0.5f, -0.2f, 0.0f};
  float beta[T * H], g[T * H];
  mi::model::gated_delta_gates(b, H, a, H, A_log, dt_bias, T, H, beta, g);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int i = t * H + h;
      const double x = double(a[i]) + dt_bias[h];
      const double softplus = x > 30 ? x : std::log1p(std::exp(x));
      EXPECT_NEAR(beta[i], 1.0 / (1.0 + std::exp(-double(b[i]))), 1e-7) << i;
      EXPECT_NEAR(g[i], -std::exp(double(A_log[h])) * softplus, 1e-6 * (1 + std::fabs(g[i]))) << i;
      EXPECT_LE(g[i], 0.0f);
    }
}

// BUG-005-3 (Q scaling applied exactly once), on the Gated DeltaNet path: q is scaled by 1/sqrt(dk) when it is
// L2-normalised, and the delta rule itself does not scale again. One token from a zero state with k = q gives, per
// value head, o = beta * v * (q_hat . k_hat) / sqrt(dk) = beta * v / sqrt(dk); scaling twice would give
// beta * v / dk (4x smaller at dk = 16), scaling never would give beta * v.
TEST(GatedDeltaInputs, QueryScaleIsAppliedExactlyOnce) {
  ThreadPool pool(2);
  const GatedDeltaDims d{.k_heads = 1, .v_heads = 1, .k_dim = 16, .v_dim = 4};
  const std::size_t ld = 2 * 16 + 4;
  std::vector<float> row(ld);
  for (int i = 0; i < 16; ++i) row[std::size_t(i)] = row[16 + std::size_t(i)] = float(i % 5) - 1.5f;  // k = q
  for (int j = 0; j < 4; ++j) row[32 + std::size_t(j)] = float(j + 1);                                // v
  mi::model::l2_normalize_heads(pool, row.data(), 1, ld, 1, 16, 1e-6f, float(1.0 / std::sqrt(16.0)));
  mi::model::l2_normalize_heads(pool, row.data() + 16, 1, ld, 1, 16, 1e-6f, 1.0f);
  const float beta = 0.75f, g = -0.5f;
  const GatedDeltaInputs in{.q = row.data(), .ldq = ld, .k = row.data() + 16, .ldk = ld, .v = row.data() + 32,
                            .ldv = ld, .beta = &beta, .g = &g};
  std::vector<float> state(mi::model::gated_delta_state_floats(d), 0.0f), out(4);
  mi::model::gated_delta_rule_recurrent<mi::kernels::Scalar>(pool, d, in, 1, state.data(), out.data(), 4);
  for (int j = 0; j < 4; ++j) {
    const double once = beta * (j + 1) / 4.0;  // 1/sqrt(16) = 1/4
    EXPECT_NEAR(out[std::size_t(j)], once, 1e-5) << "value " << j << ": twice would be " << once / 4;
  }
}

// Key heads are REPEATED to value heads (repeat_interleave: value head h reads key head h / (v_heads / k_heads)),
// not tiled (h % k_heads). Two key heads, four value heads, one token from a zero state: key head 0 has q . k = 1,
// key head 1 has q . k = 0, so value heads 0 and 1 (both of key head 0) answer beta * v / sqrt(dk) and value heads 2
// and 3 answer 0. Tiling would light up value heads 0 and 2 instead.
TEST(GatedDeltaInputs, KeyHeadsAreRepeatedNotTiledToValueHeads) {
  ThreadPool pool(2);
  const int dk = 4, dv = 2;
  const GatedDeltaDims d{.k_heads = 2, .v_heads = 4, .k_dim = dk, .v_dim = dv};
  const std::size_t qk = 2 * dk, ld = 2 * qk + 4 * dv;
  std::vector<float> row(ld, 0.0f);
  // q: head 0 = e0, head 1 = e1; k: head 0 = e0, head 1 = e2 (orthogonal to q head 1).
  row[0] = 1.0f;
  row[dk + 1] = 1.0f;
  row[qk + 0] = 1.0f;
  row[qk + dk + 2] = 1.0f;
  for (int j = 0; j < 4 * dv; ++j) row[2 * qk + std::size_t(j)] = float(j + 1);
  mi::model::l2_normalize_heads(pool, row.data(), 1, ld, 2, dk, 1e-6f, float(1.0 / std::sqrt(double(dk))));
  const std::vector<float> beta(4, 1.0f), g(4, 0.0f);
  const GatedDeltaInputs in{.q = row.data(), .ldq = ld, .k = row.data() + qk, .ldk = ld, .v = row.data() + 2 * qk,
                            .ldv = ld, .beta = beta.data(), .g = g.data()};
  std::vector<float> state(mi::model::gated_delta_state_floats(d), 0.0f), out(4 * dv);
  mi::model::gated_delta_rule_recurrent<mi::kernels::Scalar>(pool, d, in, 1, state.data(), out.data(), 4 * dv);
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < dv; ++j) {
      const double want = h < 2 ? double(h * dv + j + 1) / 2.0 : 0.0;  // 1/sqrt(dk) = 1/2
      EXPECT_NEAR(out[std::size_t(h * dv + j)], want, 1e-5) << "value head " << h << ", element " << j;
    }
}
