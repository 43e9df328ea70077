// int8-weight kernels (matvec, matmul with one f32 scale per row; ckb/contracts/int8_weights.toml) of every x86
// level against the Scalar oracle: ragged column counts (not multiples of 8, 16 or 64), row counts that exercise
// the row blocks and the single-row tails, token counts around the 4-token blocks, row stride ld > cols with the
// padding set to -128 (a value quantisation never produces) and activations that are NaN past `cols`, so a kernel
// reading past a row poisons its result. The scalar level itself is checked against a double-precision sum.
#include <type_traits>

#include "kernel_test_support.h"

namespace mi::kernels::test {
namespace {

const int kCols[] = {1, 7, 16, 17, 63, 64, 65, 130, 1000, 1024};
const int kRows[] = {1, 3, 8, 9, 17, 33};

struct Int8Matrix {
  std::vector<int8_t> q;
  std::vector<float> scale;
};

Int8Matrix random_int8(int rows, int cols, std::size_t ld, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> val(-127, 127);
  std::uniform_real_distribution<float> s(1e-4f, 2e-2f);
  Int8Matrix m{std::vector<int8_t>(std::size_t(rows) * ld, int8_t(-128)), std::vector<float>(std::size_t(rows))};
  for (int r = 0; r < rows; ++r) {
    m.scale[std::size_t(r)] = s(gen);
    for (int c = 0; c < cols; ++c) m.q[std::size_t(r) * ld + std::size_t(c)] = int8_t(val(gen));
  }
  return m;
}

// Activations [M, ldx] with ldx > cols, NaN past cols.
std::vector<float> random_acts(int M, int cols, std::size_t ldx, uint32_t seed) {
  std::vector<float> x = random_floats(std::size_t(M) * ldx, -1.0f, 1.0f, seed);
  for (int m = 0; m < M; ++m)
    for (std::size_t c = std::size_t(cols); c < ldx; ++c) x[std::size_t(m) * ldx + c] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

// |level - oracle| for y = s * sum: the two sums differ by at most dot_bound, scaled by s; each side rounds the
// final product once (relative u each).
double int8_bound(const Int8Matrix& w, std::size_t ld, const float* x, int r, int cols, double y) {
  double sum_abs = 0;
  for (int c = 0; c < cols; ++c) sum_abs += std::fabs(double(w.q[std::size_t(r) * ld + std::size_t(c)]) * x[c]);
  return double(w.scale[std::size_t(r)]) * dot_bound(cols, sum_abs) + 2.0 * kU * std::fabs(y);
}

template <class K>
class Int8Test : public ::testing::Test {};
TYPED_TEST_SUITE(Int8Test, Levels);

TYPED_TEST(Int8Test, MatvecMatchesScalar) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 11;
  for (int rows : kRows)
    for (int cols : kCols) {
      const std::size_t ld = std::size_t(cols) + 5;
      const Int8Matrix w = random_int8(rows, cols, ld, seed++);
      const std::vector<float> x = random_acts(1, cols, std::size_t(cols) + 16, seed++);
      std::vector<float> y(std::size_t(rows) + 1, -7.0f), ref(std::size_t(rows), 0.0f);
      K::matvec(w.q.data(), w.scale.data(), ld, x.data(), y.data(), rows, cols);
      Scalar::matvec(w.q.data(), w.scale.data(), ld, x.data(), ref.data(), rows, cols);
      for (int r = 0; r < rows; ++r)
        ASSERT_NEAR(y[std::size_t(r)], ref[std::size_t(r)], int8_bound(w, ld, x.data(), r, cols, ref[std::size_t(r)]))
            << K::name << " rows=" << rows << " cols=" << cols << " r=" << r;
      ASSERT_EQ(y[std::size_t(rows)], -7.0f) << K::name << ": wrote past y[rows - 1]";
    }
}

TYPED_TEST(Int8Test, MatmulMatchesScalar) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 101;
  const auto check_case = [&](int M, int rows, int cols) {
    const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 9, ldy = std::size_t(rows) + 2;
    const Int8Matrix w = random_int8(rows, cols, ld, seed++);
    const std::vector<float> x = random_acts(M, cols, ldx, seed++);
    std::vector<float> y(std::size_t(M) * ldy, -7.0f), ref(std::size_t(M) * ldy, -7.0f);
    K::matmul(w.q.data(), w.scale.data(), ld, x.data(), ldx, y.data(), ldy, M, rows, cols);
    Scalar::matmul(w.q.data(), w.scale.data(), ld, x.data(), ldx, ref.data(), ldy, M, rows, cols);
    for (int m = 0; m < M; ++m) {
      for (int r = 0; r < rows; ++r) {
        const std::size_t i = std::size_t(m) * ldy + std::size_t(r);
        ASSERT_NEAR(y[i], ref[i], int8_bound(w, ld, x.data() + std::size_t(m) * ldx, r, cols, ref[i]))
            << K::name << " M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
      }
      for (std::size_t r = std::size_t(rows); r < ldy; ++r)
        ASSERT_EQ(y[std::size_t(m) * ldy + r], -7.0f) << K::name << ": wrote into Y's row padding";
    }
  };
  for (int M : {1, 2, 3, 4, 5, 8, 9, 13})
    for (int rows : {1, 5, 16, 19, 40})
      for (int cols : {1, 17, 64, 129, 600, 1100, 8200})  // 8200: several row blocks at 40 rows
        check_case(M, rows, cols);
  // Prefill: 100 rows (AVX-512: panels of 48 + 48 + 4 rows, so each row's scale is applied past the first panel) and
  // 300 and 1100 tokens (more than one token block: AVX2 120, AVX-512 1024), odd columns.
  check_case(300, 100, 301);
  check_case(1100, 52, 301);
  check_case(20, 100, 1030);
}

// A token of a batched decode step (up to 8 tokens; at the AVX2 level any count, several-token products being the
// lone matvec per token) gets exactly what the lone matvec gives it: each level's batched kernel repeats each
// output's FMAs, so an int8 engine's served greedy output does not depend on what a request is batched with.
TYPED_TEST(Int8Test, FewTokensEqualMatvecPerTokenBitwise) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 901;
  // rows 300 at 1030 columns and rows 40 at 8200 columns span several of the AVX2 matmul's L2-sized row blocks.
  for (int M : {2, 3, 4, 5, 7, 8, 11})
    for (int rows : {1, 6, 33, 40, 300})
      for (int cols : {7, 64, 100, 1030, 8200}) {
        if (M > 8 && !std::is_same_v<K, Avx2>) continue;  // above 8 tokens the AVX-512 levels run the prefill kernel
        if ((rows == 300 && cols == 8200) || (rows == 40 && cols != 8200 && cols != 1030)) continue;
        const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 9, ldy = std::size_t(rows) + 2;
        const Int8Matrix w = random_int8(rows, cols, ld, seed++);
        const std::vector<float> x = random_acts(M, cols, ldx, seed++);
        std::vector<float> y(std::size_t(M) * ldy, -7.0f), lone(static_cast<std::size_t>(rows));
        K::matmul(w.q.data(), w.scale.data(), ld, x.data(), ldx, y.data(), ldy, M, rows, cols);
        for (int m = 0; m < M; ++m) {
          K::matvec(w.q.data(), w.scale.data(), ld, x.data() + std::size_t(m) * ldx, lone.data(), rows, cols);
          for (int r = 0; r < rows; ++r)
            ASSERT_EQ(y[std::size_t(m) * ldy + std::size_t(r)], lone[std::size_t(r)])
                << K::name << " M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
        }
      }
}

// The AVX-512 prefill packs a whole panel (16, 32 or 48 rows by 256 columns; avx512_impl.h pack_whole_panel) with
// compile-time counts and any other with masks; each output is the same sum either way. So a product of 48 to 96
// rows (whole panels of 3 vectors, then 1, 2 or 3) equals, bitwise, the products of its rows one at a time (1-row
// panels: the general path), with a whole and a partial last column block (512, 600), at 20 and 260 tokens.
TYPED_TEST(Int8Test, PanelShapeDoesNotChangeTheSums) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 5300;
  for (int M : {20, 260})
    for (int rows : {48, 64, 80, 96})
      for (int cols : {512, 600}) {
        const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 9, ldy = std::size_t(rows) + 2;
        const Int8Matrix w = random_int8(rows, cols, ld, seed++);
        const std::vector<float> x = random_acts(M, cols, ldx, seed++);
        std::vector<float> whole(std::size_t(M) * ldy, -7.0f), by_row(std::size_t(M) * ldy, -7.0f);
        K::matmul(w.q.data(), w.scale.data(), ld, x.data(), ldx, whole.data(), ldy, M, rows, cols);
        for (int r = 0; r < rows; ++r)
          K::matmul(w.q.data() + std::size_t(r) * ld, w.scale.data() + r, ld, x.data(), ldx, by_row.data() + r, ldy, M,
                    1, cols);
        for (int m = 0; m < M; ++m)
          for (int r = 0; r < rows; ++r)
            ASSERT_EQ(whole[std::size_t(m) * ldy + std::size_t(r)], by_row[std::size_t(m) * ldy + std::size_t(r)])
                << K::name << " M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
      }
}

// No columns: every output row is an empty sum, 0, at every token count (the dot forms and the prefill kernel);
// rows past `rows` in each token's output row are left alone.
TYPED_TEST(Int8Test, ZeroColumnsGiveZero) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  const int8_t q[1] = {0};
  const std::vector<float> scale(40, 1.0f);  // 1, not 0: a row left unwritten would keep its 3
  const float x[1] = {0.0f};
  for (int M = 1; M <= 9; ++M)
    for (int rows : {1, 5, 40}) {
      const std::size_t ldy = std::size_t(rows) + 2;
      std::vector<float> y(std::size_t(M) * ldy, 3.0f);
      if (M == 1) K::matvec(q, scale.data(), 0, x, y.data(), rows, 0);
      else K::matmul(q, scale.data(), 0, x, 0, y.data(), ldy, M, rows, 0);
      for (int m = 0; m < M; ++m)
        for (std::size_t r = 0; r < ldy; ++r)
          ASSERT_EQ(y[std::size_t(m) * ldy + r], int(r) < rows ? 0.0f : 3.0f)
              << K::name << " M=" << M << " rows=" << rows << " m=" << m << " r=" << r;
    }
}

// The oracle itself: scale * (f32 sum) against the exact (double) value of scale * sum q*x.
TEST(Int8Scalar, MatvecIsScaleTimesSum) {
  const int rows = 7, cols = 300;
  const Int8Matrix w = random_int8(rows, cols, cols, 5);
  const std::vector<float> x = random_floats(cols, -1.0f, 1.0f, 6);
  std::vector<float> y(rows);
  Scalar::matvec(w.q.data(), w.scale.data(), cols, x.data(), y.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    double exact = 0, sum_abs = 0;
    for (int c = 0; c < cols; ++c) {
      exact += double(w.q[std::size_t(r) * cols + std::size_t(c)]) * x[std::size_t(c)];
      sum_abs += std::fabs(double(w.q[std::size_t(r) * cols + std::size_t(c)]) * x[std::size_t(c)]);
    }
    exact *= w.scale[std::size_t(r)];
    EXPECT_NEAR(y[std::size_t(r)], exact, w.scale[std::size_t(r)] * cols * kU * sum_abs + kU * std::fabs(exact)) << r;
  }
}

}  // namespace
}  // namespace mi::kernels::test
