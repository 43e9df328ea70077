// Gated attention output (model/gated_attention.h) and partial rotary (RotaryTable's rotary_dim, model/rotary.h)
// against plain double references.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "common/error.h"
#include "kernel_levels.h"
#include "model/gated_attention.h"
#include "model/rotary.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::runtime::ThreadPool;

template <class K>
class RopePartialLevels : public ::testing::Test {};
TYPED_TEST_SUITE(RopePartialLevels, mi_test::KernelLevels, mi_test::KernelLevelName);

// Qwen3-Next / Qwen3.5 tiny: head_dim 32, partial_rotary_factor 0.25 -> rotary_dim 8, theta 1e7.
TYPED_TEST(RopePartialLevels, RotatesOnlyTheFirstRotaryDimsOfEachHead) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  const int head_dim = 32, rotary_dim = 8, heads = 3, rows = 4, first = 17;
  const double theta = 1e7;
  const mi::model::RotaryTable table(head_dim, 64, theta, std::nullopt, rotary_dim);
  ASSERT_EQ(table.rotary_dim(), rotary_dim);
  ASSERT_EQ(table.head_dim(), head_dim);
  const std::size_t ld = std::size_t(heads) * head_dim;
  const auto x0 = mi_test::random_floats(rows * ld, 91);
  auto x = x0;
  ThreadPool pool(2);
  mi::model::apply_rotary<K>(pool, table, x.data(), rows, ld, heads, head_dim, first);
  const int half = rotary_dim / 2;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const std::size_t off = std::size_t(r) * ld + std::size_t(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        // Frequencies of a rotary_dim-sized head; angle in f32 as the table computes it.
        const float inv_freq = float(1.0 / std::pow(theta, double(2 * i) / rotary_dim));
        const double angle = double(float(first + r) * inv_freq);
        const double a = x0[off + i], b = x0[off + i + half];
        ASSERT_NEAR(x[off + i], a * std::cos(angle) - b * std::sin(angle), 2e-6) << r << " " << h << " " << i;
        ASSERT_NEAR(x[off + i + half], b * std::cos(angle) + a * std::sin(angle), 2e-6);
      }
      for (int i = rotary_dim; i < head_dim; ++i) ASSERT_EQ(x[off + i], x0[off + i]) << "pass-through dim " << i;
    }
}

TEST(RopePartial, DefaultIsTheWholeHeadAndBadRotaryDimIsRejected) {
  const mi::model::RotaryTable full(32, 8, 1e6, std::nullopt);
  EXPECT_EQ(full.rotary_dim(), 32);
  EXPECT_THROW(mi::model::RotaryTable(32, 8, 1e6, std::nullopt, 7), mi::Error);
  EXPECT_THROW(mi::model::RotaryTable(32, 8, 1e6, std::nullopt, 34), mi::Error);
  EXPECT_THROW(mi::model::RotaryTable(32, 8, 1e6, std::nullopt, -2), mi::Error);
}

TEST(GatedAttention, SplitQueryGateAndSigmoidGateTheOutput) {
  const int T = 3, heads = 4, d = 8;
  const std::size_t row = std::size_t(heads) * d;
  const auto qg = mi_test::random_floats(T * 2 * row, 92, 2.0f);
  std::vector<float> q(T * row), gate(T * row);
  mi::model::split_query_gate(qg.data(), T, heads, d, q.data(), gate.data());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < d; ++i) {
        // Per head: [query (d) | gate (d)].
        ASSERT_EQ(q[t * row + h * d + i], qg[t * 2 * row + h * 2 * d + i]);
        ASSERT_EQ(gate[t * row + h * d + i], qg[t * 2 * row + h * 2 * d + d + i]);
      }
  const auto out0 = mi_test::random_floats(T * row, 93);
  auto out = out0;
  ThreadPool pool(2);
  mi::model::apply_output_gate(pool, out.data(), row, gate.data(), row, T, heads, d);
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], out0[i] / (1.0 + std::exp(-double(gate[i]))), 1e-6 * (1 + std::fabs(out0[i])));
}
