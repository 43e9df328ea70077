// model/moe_mlp.h: routing (softmax, top-k with ties to the lower id, renormalisation) and the grouped MoE block
// against a plain dense double reference (a loop over each token's chosen experts), at every kernel level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "kernel_levels.h"
#include "model/moe_mlp.h"
#include "model/scratch_arena.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::bf16_t;
using mi::model::MoeDims;
using mi::model::Numerics;
using mi::runtime::ThreadPool;

template <class K>
class MoeLevels : public ::testing::Test {};
TYPED_TEST_SUITE(MoeLevels, mi_test::KernelLevels, mi_test::KernelLevelName);

namespace {

struct MoeModel {
  MoeDims d;
  std::vector<bf16_t> router, shared_gate, shared_up, shared_down, shared_expert_gate;
  std::vector<std::vector<bf16_t>> gate, up, down;  // per expert
  std::vector<const bf16_t*> gate_p, up_p, down_p;
  mi::model::MoeWeights<bf16_t> weights() const {
    return {.router = router.data(), .gate_proj = gate_p.data(), .up_proj = up_p.data(), .down_proj = down_p.data(),
            .shared_gate_proj = shared_gate.empty() ? nullptr : shared_gate.data(),
            .shared_up_proj = shared_up.empty() ? nullptr : shared_up.data(),
            .shared_down_proj = shared_down.empty() ? nullptr : shared_down.data(),
            .shared_expert_gate = shared_expert_gate.empty() ? nullptr : shared_expert_gate.data()};
  }
};

MoeModel make_model(const MoeDims& d, unsigned seed) {
  MoeModel m;
  m.d = d;
  const std::size_t H = std::size_t(d.hidden), I = std::size_t(d.expert_intermediate),
                    Is = std::size_t(d.shared_intermediate);
  m.router = mi_test::random_bf16(std::size_t(d.experts) * H, seed, 0.5f);
  for (int e = 0; e < d.experts; ++e) {
    m.gate.push_back(mi_test::random_bf16(I * H, seed + 10 + 3 * e, 0.2f));
    m.up.push_back(mi_test::random_bf16(I * H, seed + 11 + 3 * e, 0.2f));
    m.down.push_back(mi_test::random_bf16(H * I, seed + 12 + 3 * e, 0.2f));
  }
  for (int e = 0; e < d.experts; ++e) {
    m.gate_p.push_back(m.gate[std::size_t(e)].data());
    m.up_p.push_back(m.up[std::size_t(e)].data());
    m.down_p.push_back(m.down[std::size_t(e)].data());
  }
  if (Is > 0) {
    m.shared_gate = mi_test::random_bf16(Is * H, seed + 1, 0.2f);
    m.shared_up = mi_test::random_bf16(Is * H, seed + 2, 0.2f);
    m.shared_down = mi_test::random_bf16(H * Is, seed + 3, 0.2f);
    m.shared_expert_gate = mi_test::random_bf16(H, seed + 4, 0.3f);
  }
  return m;
}

double w_at(const std::vector<bf16_t>& w, std::size_t i) { return mi::bf16_to_f32(w[i]); }

// SwiGLU in double: down(silu(gate x) * up x).
std::vector<double> reference_swiglu(const std::vector<bf16_t>& g, const std::vector<bf16_t>& u,
                                     const std::vector<bf16_t>& dn, int H, int I, const float* x) {
  std::vector<double> act(static_cast<std::size_t>(I)), y(static_cast<std::size_t>(H), 0.0);
  for (int r = 0; r < I; ++r) {
    double a = 0, b = 0;
    for (int c = 0; c < H; ++c) {
      a += w_at(g, std::size_t(r) * H + c) * x[c];
      b += w_at(u, std::size_t(r) * H + c) * x[c];
    }
    act[std::size_t(r)] = a / (1.0 + std::exp(-a)) * b;
  }
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < I; ++c) y[std::size_t(r)] += w_at(dn, std::size_t(r) * I + c) * act[std::size_t(c)];
  return y;
}

// The dense reference, token by token: softmax over all experts, top-k (ties: lower id), optional renormalisation,
// weighted sum of the chosen experts, plus sigmoid(shared gate) * shared expert.
std::vector<double> reference_moe(const MoeModel& m, const std::vector<float>& x, int T) {
  const auto& d = m.d;
  const int H = d.hidden, E = d.experts;
  std::vector<double> out(std::size_t(T) * H, 0.0);
  for (int t = 0; t < T; ++t) {
    const float* xt = x.data() + std::size_t(t) * H;
    std::vector<double> p(static_cast<std::size_t>(E));
    double mx = -1e300, sum = 0;
    for (int e = 0; e < E; ++e) {
      double acc = 0;
      for (int c = 0; c < H; ++c) acc += w_at(m.router, std::size_t(e) * H + c) * xt[c];
      p[std::size_t(e)] = acc;
      mx = std::max(mx, acc);
    }
    for (auto& v : p) sum += (v = std::exp(v - mx));
    for (auto& v : p) v /= sum;
    std::vector<int> chosen;
    for (int j = 0; j < d.top_k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (std::find(chosen.begin(), chosen.end(), e) == chosen.end() && (best < 0 || p[std::size_t(e)] > p[std::size_t(best)]))
          best = e;
      chosen.push_back(best);
    }
    double norm = 0;
    for (int e : chosen) norm += p[std::size_t(e)];
    double* o = out.data() + std::size_t(t) * H;
    for (int e : chosen) {
      const double w = d.norm_topk_prob ? p[std::size_t(e)] / norm : p[std::size_t(e)];
      const auto y = reference_swiglu(m.gate[std::size_t(e)], m.up[std::size_t(e)], m.down[std::size_t(e)], H,
                                      d.expert_intermediate, xt);
      for (int i = 0; i < H; ++i) o[i] += w * y[std::size_t(i)];
    }
    if (d.shared_intermediate > 0) {
      double logit = 0;
      for (int c = 0; c < H; ++c) logit += w_at(m.shared_expert_gate, std::size_t(c)) * xt[c];
      const auto y = reference_swiglu(m.shared_gate, m.shared_up, m.shared_down, H, d.shared_intermediate, xt);
      for (int i = 0; i < H; ++i) o[i] += y[std::size_t(i)] / (1.0 + std::exp(-logit));
    }
  }
  return out;
}

template <class K, Numerics N>
std::vector<float> run_moe(ThreadPool& pool, const MoeModel& m, const std::vector<float>& x, int T) {
  mi::model::ScratchPlan plan;
  mi::model::plan_moe_scratch<N>(plan, m.d, T);
  mi::model::ScratchArena arena(plan.bytes);
  const auto scratch = mi::model::take_moe_scratch<N>(arena, m.d, T);
  EXPECT_EQ(arena.used(), plan.bytes);
  std::vector<float> out(std::size_t(T) * m.d.hidden, -1.0f);
  mi::model::moe_mlp<K, N>(pool, m.d, m.weights(), x.data(), T, out.data(), scratch);
  return out;
}

double scaled_max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, mag = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(b[i]));
  }
  return diff / mag;
}

}  // namespace

TEST(MoeRouting, SoftmaxTopKTiesToLowerIdAndRenormalise) {
  // Experts 1, 2 and 4 tie for the top probability: the lower ids win.
  float logits[] = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f};
  int ids[2];
  float w[2];
  mi::model::route_top_k<mi::kernels::Scalar>(logits, 1, 5, 2, true, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);

  float logits2[] = {0.5f, -1.0f, 2.0f, 1.0f};
  mi::model::route_top_k<mi::kernels::Scalar>(logits2, 1, 4, 2, false, ids, w);
  const double z = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0) + std::exp(1.0);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_NEAR(w[0], std::exp(2.0) / z, 1e-6);  // not renormalised: the softmax probability itself
  EXPECT_NEAR(w[1], std::exp(1.0) / z, 1e-6);

  float bad[] = {0.0f};
  EXPECT_THROW(mi::model::route_top_k<mi::kernels::Scalar>(bad, 1, 1, 2, true, ids, w), mi::Error);
}

TYPED_TEST(MoeLevels, GroupedExpertsMatchDenseReference) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(3);
  // qwen3_next-tiny's shape, and a variant without renormalisation or shared expert.
  const MoeDims with_shared{.hidden = 128, .experts = 8, .top_k = 2, .expert_intermediate = 64,
                            .shared_intermediate = 64, .norm_topk_prob = true};
  const MoeDims plain{.hidden = 48, .experts = 6, .top_k = 3, .expert_intermediate = 20, .shared_intermediate = 0,
                      .norm_topk_prob = false};
  for (const MoeDims& d : {with_shared, plain}) {
    const MoeModel m = make_model(d, 101);
    for (int T : {1, 11}) {
      const auto x = mi_test::random_floats(std::size_t(T) * d.hidden, 102 + T);
      const auto out = run_moe<K, Numerics::precise>(pool, m, x, T);
      const auto ref = reference_moe(m, x, T);
      EXPECT_LT(scaled_max_diff(out, ref), 2e-5) << "H=" << d.hidden << " T=" << T;
    }
  }
}

// A batch of tokens (grouped by expert, one matmul per expert) equals running the tokens one at a time.
TYPED_TEST(MoeLevels, BatchEqualsTokenByToken) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const MoeDims d{.hidden = 64, .experts = 8, .top_k = 2, .expert_intermediate = 32, .shared_intermediate = 32,
                  .norm_topk_prob = true};
  const MoeModel m = make_model(d, 111);
  const int T = 9;
  const auto x = mi_test::random_floats(std::size_t(T) * d.hidden, 112);
  const auto batch = run_moe<K, Numerics::precise>(pool, m, x, T);
  for (int t = 0; t < T; ++t) {
    const std::vector<float> xt(x.begin() + std::ptrdiff_t(t) * d.hidden, x.begin() + std::ptrdiff_t(t + 1) * d.hidden);
    const auto one = run_moe<K, Numerics::precise>(pool, m, xt, 1);
    for (int i = 0; i < d.hidden; ++i)
      ASSERT_NEAR(batch[std::size_t(t) * d.hidden + i], one[std::size_t(i)], 1e-5 * (1 + std::fabs(one[std::size_t(i)])))
          << t << " " << i;
  }
}

// Fast mode (bf16 matmul inputs) runs the same path; it only has to stay near the f32 result.
TYPED_TEST(MoeLevels, FastModeStaysNearTheReference) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const MoeDims d{.hidden = 64, .experts = 8, .top_k = 2, .expert_intermediate = 32, .shared_intermediate = 32,
                  .norm_topk_prob = true};
  const MoeModel m = make_model(d, 121);
  const int T = 5;
  const auto x = mi_test::random_floats(std::size_t(T) * d.hidden, 122);
  const auto out = run_moe<K, Numerics::fast>(pool, m, x, T);
  EXPECT_LT(scaled_max_diff(out, reference_moe(m, x, T)), 3e-2);
}
