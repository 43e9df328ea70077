// model/rms_norm_gated.h against a plain double reference: y = rmsnorm(x) * w * silu(z), norm first, then the gate
// (BUG-005-2), at every kernel level.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_levels.h"
#include "model/rms_norm_gated.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::runtime::ThreadPool;

template <class K>
class RmsNormGatedLevels : public ::testing::Test {};
TYPED_TEST_SUITE(RmsNormGatedLevels, mi_test::KernelLevels, mi_test::KernelLevelName);

TYPED_TEST(RmsNormGatedLevels, NormFirstThenSiluGatePerHead) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const int rows = 5, heads = 4, dv = 16, n = heads * dv;
  const std::size_t ldz = n + 7;  // z is a view into a wider projection output
  const auto x = mi_test::random_floats(std::size_t(rows) * n, 81, 2.0f);
  const auto z = mi_test::random_floats(std::size_t(rows) * ldz, 82, 2.0f);
  const auto w = mi_test::random_floats(dv, 83, 0.5f);
  std::vector<float> y(x.size()), y_inplace = x;
  mi::model::rms_norm_gated<K>(pool, x.data(), n, z.data(), ldz, w.data(), y.data(), n, rows, heads, dv, 1e-6f);
  mi::model::rms_norm_gated<K>(pool, y_inplace.data(), n, z.data(), ldz, w.data(), y_inplace.data(), n, rows, heads,
                               dv, 1e-6f);
  double worst_gate_first = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const float* xs = x.data() + std::size_t(r) * n + std::size_t(h) * dv;
      const float* zs = z.data() + std::size_t(r) * ldz + std::size_t(h) * dv;
      double ss = 0, ss_gated = 0;
      for (int i = 0; i < dv; ++i) {
        ss += double(xs[i]) * xs[i];
        const double gx = xs[i] * (zs[i] / (1.0 + std::exp(-double(zs[i]))));
        ss_gated += gx * gx;
      }
      const double inv = 1.0 / std::sqrt(ss / dv + 1e-6), inv_gated = 1.0 / std::sqrt(ss_gated / dv + 1e-6);
      for (int i = 0; i < dv; ++i) {
        const double silu_z = zs[i] / (1.0 + std::exp(-double(zs[i])));
        const double ref = double(xs[i]) * inv * w[i] * silu_z;
        const std::size_t at = std::size_t(r) * n + std::size_t(h) * dv + i;
        ASSERT_NEAR(y[at], ref, 3e-6 * (1 + std::fabs(ref))) << r << " " << h << " " << i;
        ASSERT_EQ(y_inplace[at], y[at]);
        // The wrong order (gate, then norm) gives a different result: the test can tell them apart.
        worst_gate_first = std::max(worst_gate_first, std::fabs(xs[i] * silu_z * inv_gated * w[i] - ref));
      }
    }
  EXPECT_GT(worst_gate_first, 1e-2);
}
