// (1+w) RMSNorm (model/rms_norm_one_plus_w.h): folding 1 + w into the weight equals y = x / rms(x) * (1 + w).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/scalar/scalar.h"
#include "model/rms_norm_one_plus_w.h"

namespace {

TEST(RmsNormOnePlusW, FoldedWeightMatchesTheDefinition) {
  const int n = 64;
  std::vector<float> x(n), w(n);
  for (int i = 0; i < n; ++i) {
    x[std::size_t(i)] = std::sin(0.3f * float(i)) * 3.0f;
    w[std::size_t(i)] = 0.01f * float(i - 32);  // zero-centred, as stored
  }
  std::vector<float> folded = w;
  mi::model::fold_one_plus_w(folded);
  std::vector<float> y(n);
  mi::kernels::Scalar::rmsnorm(x.data(), folded.data(), y.data(), n, 1e-6f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
  for (int i = 0; i < n; ++i) {
    const double ref = double(x[std::size_t(i)]) * inv * (1.0 + double(w[std::size_t(i)]));
    EXPECT_NEAR(y[std::size_t(i)], ref, 1e-5 * (1.0 + std::fabs(ref))) << i;
    // A plain w-norm would be wrong by a factor ~ 1/w: the fold matters.
    EXPECT_EQ(folded[std::size_t(i)], 1.0f + w[std::size_t(i)]);
  }
}

}  // namespace
