// The hybrid components run on caller-provided state and scratch: they allocate nothing per call. Counted by
// replacing the global operator new in this test executable. (A whole model's decode step: the emitted models'
// DecodeStepAllocatesNothing, tests/unit/emitted.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "kernels/scalar/scalar.h"
#include "model/causal_conv1d.h"
#include "model/gated_attention.h"
#include "model/gated_delta_rule.h"
#include "model/moe_mlp.h"
#include "model/recurrent_state.h"
#include "model/rms_norm_gated.h"
#include "test_util.h"

#include "../counting_allocator.h"

namespace {

TEST(NoAllocation, CountingWorks) {
  const long before = g_allocations.load();
  void* p = ::operator new(16);  // an explicit call, which the compiler may not elide (unlike new int)
  ::operator delete(p);
  EXPECT_EQ(g_allocations.load() - before, 1);
}


// The hybrid-model components (Gated DeltaNet layer parts, gated attention output, MoE) run on caller-provided state
// and scratch: prefill and decode calls allocate nothing once the buffers exist.
TEST(NoAllocation, HybridComponentsPrefillAndDecode) {
  using K = mi::kernels::Scalar;
  using namespace mi::model;
  mi::runtime::ThreadPool pool(2);
  const int T = 20, H = 32;
  const Conv1dDims conv{.channels = 64, .kernel = 4};
  const GatedDeltaDims gd{.k_heads = 1, .v_heads = 2, .k_dim = 16, .v_dim = 16};
  const MoeDims md{.hidden = H, .experts = 4, .top_k = 2, .expert_intermediate = 8, .shared_intermediate = 8};
  RecurrentStateCache states({.linear_layers = 1, .conv = conv, .delta = gd, .max_sequences = 1});
  const auto x = mi_test::random_floats(std::size_t(T) * 64, 1);  // q | k | v, 64 channels
  const auto cw = mi_test::random_floats(std::size_t(64) * 4, 2, 0.5f);
  const auto z = mi_test::random_floats(std::size_t(T) * 32, 3);
  const std::vector<float> nw(16, 1.0f), beta(std::size_t(T) * 2, 0.5f), g(std::size_t(T) * 2, -0.1f);
  std::vector<float> y(std::size_t(T) * 64), o(std::size_t(T) * 32);
  std::vector<float> scratch(gated_delta_chunked_scratch_floats(gd, 8, pool.size()));
  const auto w = mi_test::random_bf16(std::size_t(H) * H * 4, 4, 0.2f);  // every MoE matrix is a view into this
  const mi::bf16_t* ep[4] = {w.data(), w.data() + 256, w.data() + 512, w.data() + 768};
  const MoeWeights<mi::bf16_t> mw{.router = w.data(), .gate_proj = ep, .up_proj = ep, .down_proj = ep,
                              .shared_gate_proj = w.data(), .shared_up_proj = w.data(), .shared_down_proj = w.data(),
                              .shared_expert_gate = w.data()};
  ScratchPlan plan;
  plan_moe_scratch<Numerics::precise>(plan, md, T);
  ScratchArena arena(plan.bytes);
  const auto ms = take_moe_scratch<Numerics::precise>(arena, md, T);
  const auto mx = mi_test::random_floats(std::size_t(T) * H, 5);
  std::vector<float> mo(std::size_t(T) * H);
  float* conv_states[1] = {states.conv(0, 0)};
  float* delta_states[1] = {states.delta(0, 0)};

  const long before = g_allocations.load();
  for (int t_count : {T, 1}) {  // a prefill, then a decode step
    causal_conv1d_silu<K>(pool, conv, x.data(), 64, t_count, cw.data(), states.conv(0, 0), y.data(), 64);
    const GatedDeltaInputs in{.q = y.data(), .ldq = 64, .k = y.data() + 16, .ldk = 64, .v = y.data() + 32,
                              .ldv = 64, .beta = beta.data(), .g = g.data()};
    l2_normalize_heads(pool, y.data(), t_count, 64, 2, 16, 1e-6f, 0.25f);
    if (t_count > 1)
      gated_delta_rule_chunked<K>(pool, gd, in, t_count, 8, states.delta(0, 0), o.data(), 32, scratch.data());
    else
      gated_delta_rule_recurrent<K>(pool, gd, in, 1, states.delta(0, 0), o.data(), 32);
    rms_norm_gated<K>(pool, o.data(), 32, z.data(), 32, nw.data(), o.data(), 32, t_count, 2, 16, 1e-6f);
    apply_output_gate(pool, o.data(), 32, z.data(), 32, t_count, 2, 16);
    moe_mlp<K, Numerics::precise>(pool, md, mw, mx.data(), t_count, mo.data(), ms);
  }
  causal_conv1d_silu_decode_batch<K>(pool, conv, x.data(), 64, 1, cw.data(), conv_states, y.data(), 64);
  const GatedDeltaInputs in1{.q = y.data(), .ldq = 64, .k = y.data() + 16, .ldk = 64, .v = y.data() + 32, .ldv = 64,
                             .beta = beta.data(), .g = g.data()};
  gated_delta_rule_decode_batch<K>(pool, gd, in1, 1, delta_states, o.data(), 32);
  EXPECT_EQ(g_allocations.load() - before, 0);
}

}  // namespace
