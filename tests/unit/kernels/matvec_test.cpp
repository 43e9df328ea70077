// Decode kernels (matvec, matvec_fast) of every x86 level against the Scalar oracle: odd and aligned column
// counts, row counts that exercise the 4-row blocks and the single-row tail, bf16 and f32 weights, row stride
// ld > cols with NaN padding (reading past a row would poison the result).
#include "kernel_test_support.h"

namespace mi::kernels::test {
namespace {

const int kCols[] = {1, 2, 7, 15, 16, 17, 33, 64, 255, 4097};
const int kRows[] = {1, 3, 17, 64};

template <class K>
class MatvecTest : public ::testing::Test {};
TYPED_TEST_SUITE(MatvecTest, Levels);

// y = W x for weights of type W and activations of type X, through `level_fn`, compared with `oracle_fn`.
template <class W, class X, class LevelFn, class OracleFn>
void check_matvec(const char* what, LevelFn level_fn, OracleFn oracle_fn) {
  uint32_t seed = 1;
  for (int rows : kRows)
    for (int cols : kCols) {
      const std::size_t ld = std::size_t(cols) + 3;
      const std::vector<W> w = random_matrix<W>(rows, cols, ld, seed++);
      const std::vector<X> x = random_matrix<X>(1, cols, std::size_t(cols), seed++);
      std::vector<float> y(std::size_t(rows) + 1, -7.0f), ref(std::size_t(rows), 0.0f);
      level_fn(w.data(), ld, x.data(), y.data(), rows, cols);
      oracle_fn(w.data(), ld, x.data(), ref.data(), rows, cols);
      for (int r = 0; r < rows; ++r) {
        double sum_abs = 0;
        for (int c = 0; c < cols; ++c) sum_abs += std::fabs(as_double(w[std::size_t(r) * ld + c]) * as_double(x[c]));
        ASSERT_NEAR(y[r], ref[r], dot_bound(cols, sum_abs)) << what << " rows=" << rows << " cols=" << cols << " r=" << r;
      }
      ASSERT_EQ(y[rows], -7.0f) << what << ": wrote past y[rows - 1]";
    }
}

TYPED_TEST(MatvecTest, Bf16WeightsF32Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matvec<bf16_t, float>(
      "matvec(bf16)",
      [](const bf16_t* w, std::size_t ld, const float* x, float* y, int r, int c) { K::matvec(w, ld, x, y, r, c); },
      [](const bf16_t* w, std::size_t ld, const float* x, float* y, int r, int c) { Scalar::matvec(w, ld, x, y, r, c); });
}

TYPED_TEST(MatvecTest, F32WeightsF32Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matvec<float, float>(
      "matvec(f32)",
      [](const float* w, std::size_t ld, const float* x, float* y, int r, int c) { K::matvec(w, ld, x, y, r, c); },
      [](const float* w, std::size_t ld, const float* x, float* y, int r, int c) { Scalar::matvec(w, ld, x, y, r, c); });
}

// Fast mode: products of two bf16 are exact in f32, so only the summation order differs (and, with VDPBF16PS,
// subnormal flushing, which these normal-range inputs do not reach).
TYPED_TEST(MatvecTest, FastBf16WeightsBf16Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matvec<bf16_t, bf16_t>(
      "matvec_fast",
      [](const bf16_t* w, std::size_t ld, const bf16_t* x, float* y, int r, int c) { K::matvec_fast(w, ld, x, y, r, c); },
      [](const bf16_t* w, std::size_t ld, const bf16_t* x, float* y, int r, int c) {
        Scalar::matvec_fast(w, ld, x, y, r, c);
      });
}

TYPED_TEST(MatvecTest, ZeroColumnsGiveZero) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  const bf16_t w[1] = {bf16_t{0x7fc0}};
  const float x[1] = {std::numeric_limits<float>::quiet_NaN()};
  float y[3] = {5.0f, 5.0f, 5.0f};
  K::matvec(w, 0, x, y, 3, 0);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace mi::kernels::test
