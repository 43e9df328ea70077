// Test contract, stage basic_execution (ckb/contracts/kernels.toml, thread_pool.toml): this engine's kernel level
// against the scalar oracle and a double-precision reference, at this model's own dimensions.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "engine_config.h"
#include "kernels/scalar/scalar.h"
#include "model.h"
#include "runtime/thread_pool.h"
#include "stage_test_support.h"

namespace {
using K = engine::Model::K;
using engine::config::kHeadDim;
using engine::config::kHidden;
using engine::config::kIntermediate;

struct Shape {
  int rows, cols;
};
const Shape kShapes[] = {{kHidden, kHidden}, {kIntermediate, kHidden}, {kHidden, kIntermediate}, {33, 7}, {17, 4097}};

TEST(BasicExecution, MatvecMatchesDoubleReferenceAtModelShapes) {
  for (const Shape s : kShapes) {
    const auto w = stage::to_bf16(stage::random_floats(std::size_t(s.rows) * s.cols, 1 + s.rows, 0.5f));
    const auto x = stage::random_floats(std::size_t(s.cols), 7 + s.cols);
    std::vector<double> ref, abs_sum;
    stage::matvec_reference(w.data(), x.data(), s.rows, s.cols, ref, abs_sum);
    std::vector<float> y(std::size_t(s.rows));
    K::matvec(w.data(), std::size_t(s.cols), x.data(), y.data(), s.rows, s.cols);
    for (int r = 0; r < s.rows; ++r)
      ASSERT_NEAR(y[std::size_t(r)], ref[std::size_t(r)], stage::f32_sum_bound(s.cols, abs_sum[std::size_t(r)]))
          << K::name << " matvec row " << r << " of " << s.rows << "x" << s.cols;
  }
}

TEST(BasicExecution, MatmulMatchesMatvecForEveryToken) {
  const int rows = kHidden, cols = kHidden;
  for (int M : {1, 3, 17}) {
    const auto w = stage::to_bf16(stage::random_floats(std::size_t(rows) * cols, 3, 0.5f));
    const auto x = stage::random_floats(std::size_t(M) * cols, 11 + M);
    std::vector<float> y(std::size_t(M) * rows);
    K::matmul(w.data(), std::size_t(cols), x.data(), std::size_t(cols), y.data(), std::size_t(rows), M, rows, cols);
    for (int m = 0; m < M; ++m) {
      std::vector<double> ref, abs_sum;
      stage::matvec_reference(w.data(), x.data() + std::size_t(m) * cols, rows, cols, ref, abs_sum);
      for (int r = 0; r < rows; ++r)
        ASSERT_NEAR(y[std::size_t(m) * rows + r], ref[std::size_t(r)], stage::f32_sum_bound(cols, abs_sum[std::size_t(r)]))
            << K::name << " matmul M=" << M << " token " << m << " row " << r;
    }
  }
}

TEST(BasicExecution, FastMatvecUsesBf16Activations) {
  const int rows = kHidden, cols = kIntermediate;
  const auto w = stage::to_bf16(stage::random_floats(std::size_t(rows) * cols, 5, 0.5f));
  const auto xb = stage::to_bf16(stage::random_floats(std::size_t(cols), 9));
  std::vector<double> ref, abs_sum;
  stage::matvec_reference(w.data(), xb.data(), rows, cols, ref, abs_sum);  // products of bf16 values are exact
  std::vector<float> y(static_cast<std::size_t>(rows));
  K::matvec_fast(w.data(), std::size_t(cols), xb.data(), y.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    ASSERT_NEAR(y[std::size_t(r)], ref[std::size_t(r)], stage::f32_sum_bound(cols, abs_sum[std::size_t(r)])) << "row " << r;
}

TEST(BasicExecution, ToBf16IsBitIdenticalToTheReferenceRounding) {
  const auto x = stage::random_floats(4099, 13, 1e3f);
  std::vector<mi::bf16_t> y(x.size());
  K::to_bf16(x.data(), y.data(), int(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i].bits, mi::f32_to_bf16(x[i]).bits) << "element " << i;
}

TEST(BasicExecution, ElementwiseKernelsMatchDoubleReference) {
  const int n = kHidden;
  const auto x = stage::random_floats(std::size_t(n), 21, 3.0f);
  const auto w = stage::random_floats(std::size_t(n), 22, 1.0f);
  // RMSNorm: mean of squares (failure mode BUG-005-1: not the sum).
  double sum_sq = 0;
  for (float v : x) sum_sq += double(v) * v;
  const double inv = 1.0 / std::sqrt(sum_sq / n + 1e-6);
  std::vector<float> y(static_cast<std::size_t>(n));
  K::rmsnorm(x.data(), w.data(), y.data(), n, 1e-6f);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(y[std::size_t(i)], w[std::size_t(i)] * x[std::size_t(i)] * inv, 1e-5 * (1 + std::fabs(y[std::size_t(i)])));
  // softmax
  std::vector<float> s = x;
  K::softmax(s.data(), n);
  double mx = -1e300, z = 0;
  for (float v : x) mx = std::max(mx, double(v));
  for (float v : x) z += std::exp(double(v) - mx);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(s[std::size_t(i)], std::exp(double(x[std::size_t(i)]) - mx) / z, 1e-6);
  // silu(gate) * up
  std::vector<float> out(static_cast<std::size_t>(n));
  K::silu_mul(x.data(), w.data(), out.data(), n);
  for (int i = 0; i < n; ++i) {
    const double g = x[std::size_t(i)];
    ASSERT_NEAR(out[std::size_t(i)], g / (1 + std::exp(-g)) * w[std::size_t(i)], 1e-5 * (1 + std::fabs(out[std::size_t(i)])));
  }
  // rotate-half rotary on one head
  std::vector<float> head = stage::random_floats(std::size_t(kHeadDim), 31), cos(kHeadDim / 2), sin(kHeadDim / 2);
  for (int i = 0; i < kHeadDim / 2; ++i) cos[std::size_t(i)] = std::cos(0.1 * i), sin[std::size_t(i)] = std::sin(0.1 * i);
  std::vector<float> rotated = head;
  K::rope_rotate_half(rotated.data(), cos.data(), sin.data(), kHeadDim);
  const int half = kHeadDim / 2;
  for (int i = 0; i < half; ++i) {
    const double a = head[std::size_t(i)], b = head[std::size_t(i + half)];
    ASSERT_NEAR(rotated[std::size_t(i)], a * cos[std::size_t(i)] - b * sin[std::size_t(i)], 1e-6);
    ASSERT_NEAR(rotated[std::size_t(i + half)], b * cos[std::size_t(i)] + a * sin[std::size_t(i)], 1e-6);
  }
}

TEST(BasicExecution, ThreadPoolCoversEveryItemOnceDeterministically) {
  mi::runtime::ThreadPool pool(engine::config::kThreads);
  for (int n : {0, 1, 7, 1000, 4097}) {
    std::vector<std::atomic<int>> hits(std::size_t(n > 0 ? n : 1));
    pool.parallel_for(n, 16, [&](int b, int e) {
      for (int i = b; i < e; ++i) hits[std::size_t(i)]++;
    });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[std::size_t(i)].load(), 1) << "item " << i << " of " << n;
  }
}

}  // namespace
