// Prefill kernels (matmul, matmul_fast) of every x86 level against the Scalar oracle, over token counts that
// take the dot-form path (M < 4), the one-row path of batched decode (4..8) and the register-blocked path (full and partial micro-tiles), odd and aligned
// column counts (including more than one cache block of columns), row counts below, at and above one packed
// panel (AVX-512: 48 rows, f32 and bf16 pairs alike), bf16 and f32 weights, and row strides ld/ldx/ldy larger than the rows they hold (NaN padding in W and
// X; Y padding must stay untouched).
#include "kernel_test_support.h"

#include <type_traits>

namespace mi::kernels::test {
namespace {

const int kCols[] = {1, 2, 7, 15, 16, 17, 33, 64, 255, 4097};
const int kRows[] = {1, 3, 17, 64};
const int kTokens[] = {1, 2, 4, 5, 8, 9, 16, 31, 32, 33};  // dot form up to 32 at avx2, packed past it
constexpr float kYPad = -7.0f;

template <class K>
class MatmulTest : public ::testing::Test {};
TYPED_TEST_SUITE(MatmulTest, Levels);

template <class W, class X, class LevelFn, class OracleFn>
void check_matmul_case(const char* what, int M, int rows, int cols, uint32_t seed, LevelFn level_fn,
                       OracleFn oracle_fn) {
  const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 5, ldy = std::size_t(rows) + 2;
  const std::vector<W> w = random_matrix<W>(rows, cols, ld, seed);
  const std::vector<X> x = random_matrix<X>(M, cols, ldx, seed + 1000);
  std::vector<float> y(std::size_t(M) * ldy, kYPad), ref(std::size_t(M) * ldy, kYPad);
  level_fn(w.data(), ld, x.data(), ldx, y.data(), ldy, M, rows, cols);
  oracle_fn(w.data(), ld, x.data(), ldx, ref.data(), ldy, M, rows, cols);
  for (int m = 0; m < M; ++m) {
    for (int r = 0; r < rows; ++r) {
      double sum_abs = 0;
      for (int c = 0; c < cols; ++c)
        sum_abs += std::fabs(as_double(w[std::size_t(r) * ld + c]) * as_double(x[std::size_t(m) * ldx + c]));
      const std::size_t i = std::size_t(m) * ldy + r;
      ASSERT_NEAR(y[i], ref[i], dot_bound(cols, sum_abs))
          << what << " M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
    }
    for (std::size_t r = std::size_t(rows); r < ldy; ++r)
      ASSERT_EQ(y[std::size_t(m) * ldy + r], kYPad) << what << ": wrote into Y padding, M=" << M << " rows=" << rows;
  }
}

template <class W, class X, class LevelFn, class OracleFn>
void check_matmul(const char* what, LevelFn level_fn, OracleFn oracle_fn) {
  uint32_t seed = 7;
  for (int M : kTokens)
    for (int rows : kRows)
      for (int cols : kCols) check_matmul_case<W, X>(what, M, rows, cols, seed++, level_fn, oracle_fn);
  // More tokens than one token block (AVX2: 120 - the 200-token case; AVX-512: 1024 - the 1100-token case) and rows
  // spanning several panels with a tail (AVX-512: 48-row panels, then a 4-row one).
  check_matmul_case<W, X>(what, 200, 45, 300, seed++, level_fn, oracle_fn);
  check_matmul_case<W, X>(what, 300, 100, 301, seed++, level_fn, oracle_fn);
  check_matmul_case<W, X>(what, 1100, 52, 301, seed++, level_fn, oracle_fn);
  // Exactly one AVX-512 panel (48 rows) and a full panel plus a 2-vector tail (80), with micro-tile tails of 2,
  // 3, 5 and 6 tokens after a full 8.
  for (int rows : {48, 80})
    for (int M : {10, 11, 13, 14}) check_matmul_case<W, X>(what, M, rows, 301, seed++, level_fn, oracle_fn);
}

TYPED_TEST(MatmulTest, Bf16WeightsF32Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matmul<bf16_t, float>(
      "matmul(bf16)",
      [](const bf16_t* w, std::size_t ld, const float* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { K::matmul(w, ld, x, ldx, y, ldy, M, r, c); },
      [](const bf16_t* w, std::size_t ld, const float* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { Scalar::matmul(w, ld, x, ldx, y, ldy, M, r, c); });
}

TYPED_TEST(MatmulTest, F32WeightsF32Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matmul<float, float>(
      "matmul(f32)",
      [](const float* w, std::size_t ld, const float* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { K::matmul(w, ld, x, ldx, y, ldy, M, r, c); },
      [](const float* w, std::size_t ld, const float* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { Scalar::matmul(w, ld, x, ldx, y, ldy, M, r, c); });
}

TYPED_TEST(MatmulTest, FastBf16WeightsBf16Activations) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  check_matmul<bf16_t, bf16_t>(
      "matmul_fast",
      [](const bf16_t* w, std::size_t ld, const bf16_t* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { K::matmul_fast(w, ld, x, ldx, y, ldy, M, r, c); },
      [](const bf16_t* w, std::size_t ld, const bf16_t* x, std::size_t ldx, float* y, std::size_t ldy, int M, int r,
         int c) { Scalar::matmul_fast(w, ld, x, ldx, y, ldy, M, r, c); });
}

// A batched decode step (one token per sequence, up to 8) runs matmul where a lone step runs matvec. On every level
// (f32 activations) each token's row of the product is computed with the FMAs of the lone matvec in the same order,
// so a sequence's logits do not depend on what it is batched with: bitwise equal, not just close.
// A batched decode step's row for token m equals that token's lone matvec bitwise, for every token count, row
// count, width (tails, and widths past the kernels' activation chunks) and each weight/activation combination.
template <class K, class W, class X, class Matmul, class Matvec>
void expect_few_tokens_equal_matvec(Matmul matmul, Matvec matvec) {
  uint32_t seed = 900;
  for (int M = 1; M <= 8; ++M)
    for (int rows : {1, 9, 40, 100})
      for (int cols : {7, 33, 1024, 1030, 8200}) {
        if (cols == 8200 && rows != 9) continue;  // chunk boundaries: one row count is enough
        if (rows == 100 && cols != 1030) continue;  // several row panels, each walked in column spans
        const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 5, ldy = std::size_t(rows) + 2;
        const std::vector<W> w = random_matrix<W>(rows, cols, ld, seed++);
        const std::vector<X> x = random_matrix<X>(M, cols, ldx, seed++);
        std::vector<float> y(std::size_t(M) * ldy, kYPad);
        std::vector<float> lone(static_cast<std::size_t>(rows));
        matmul(w.data(), ld, x.data(), ldx, y.data(), ldy, M, rows, cols);
        for (int m = 0; m < M; ++m) {
          matvec(w.data(), ld, x.data() + std::size_t(m) * ldx, lone.data(), rows, cols);
          for (int r = 0; r < rows; ++r)
            ASSERT_EQ(y[std::size_t(m) * ldy + r], lone[std::size_t(r)])
                << "M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
        }
      }
}

TYPED_TEST(MatmulTest, FewTokensEqualMatvecPerTokenBitwise) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  expect_few_tokens_equal_matvec<K, bf16_t, float>(
      [](auto... a) { K::matmul(a...); }, [](auto... a) { K::matvec(a...); });
  expect_few_tokens_equal_matvec<K, float, float>(
      [](auto... a) { K::matmul(a...); }, [](auto... a) { K::matvec(a...); });
  expect_few_tokens_equal_matvec<K, bf16_t, bf16_t>(
      [](auto... a) { K::matmul_fast(a...); }, [](auto... a) { K::matvec_fast(a...); });
}

// The prefill kernels walk tokens in blocks (AVX2: 120, AVX-512: 1024, AMX tiles: 32) but every output sums its
// column blocks in column order whichever token block (and micro-tile) holds its token, so a token's row of Y does not
// depend on how many tokens are multiplied with it: the product of 1100 tokens equals, bitwise, the products of its
// first 37 and last 1063 tokens. 37: past every level's dot-form token count (8; AVX2 32) and not a multiple of a
// micro-tile (8, 6), so tokens land at other places in their blocks and tiles.
template <class W, class X, class Matmul>
void expect_token_blocks_do_not_change_sums(Matmul matmul) {
  const int M = 1100, split = 37, rows = 52, cols = 530;
  const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 5, ldy = std::size_t(rows) + 2;
  const std::vector<W> w = random_matrix<W>(rows, cols, ld, 4242);
  const std::vector<X> x = random_matrix<X>(M, cols, ldx, 4243);
  std::vector<float> whole(std::size_t(M) * ldy, kYPad), parts(std::size_t(M) * ldy, kYPad);
  matmul(w.data(), ld, x.data(), ldx, whole.data(), ldy, M, rows, cols);
  matmul(w.data(), ld, x.data(), ldx, parts.data(), ldy, split, rows, cols);
  matmul(w.data(), ld, x.data() + std::size_t(split) * ldx, ldx, parts.data() + std::size_t(split) * ldy, ldy,
         M - split, rows, cols);
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < rows; ++r)
      ASSERT_EQ(whole[std::size_t(m) * ldy + r], parts[std::size_t(m) * ldy + r]) << "m=" << m << " r=" << r;
}

TYPED_TEST(MatmulTest, TokenBlocksDoNotChangeTheSums) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  expect_token_blocks_do_not_change_sums<bf16_t, float>([](auto... a) { K::matmul(a...); });
  expect_token_blocks_do_not_change_sums<float, float>([](auto... a) { K::matmul(a...); });
  expect_token_blocks_do_not_change_sums<bf16_t, bf16_t>([](auto... a) { K::matmul_fast(a...); });
}

// A panel's shape does not change the sums either: the AVX-512 prefill packs whole panels (48, 32 or 16 rows by 256
// columns) with compile-time counts and every other panel with masks (avx512_impl.h pack_whole_panel, reached from
// pack_panel and bf16_dot_impl.h pack_pairs), and each output is the same sum in both. So the product of 48 to 96
// rows (whole panels of 3, then 1, 2 or 3 vectors) equals, bitwise, the products of its rows one at a time (a 1-row
// panel: the general path), with a whole and a partial last column block (512 and 600 columns). (The pair packing
// runs at the avx512bf16 level only; the amx level takes tiles for bf16 products. int8: Int8Test, same check.)
template <class W, class X, class Matmul>
void expect_panel_shape_does_not_change_sums(Matmul matmul) {
  uint32_t seed = 5150;
  for (int M : {20, 260})
    for (int rows : {48, 64, 80, 96})
      for (int cols : {512, 600}) {
        const std::size_t ld = std::size_t(cols) + 3, ldx = std::size_t(cols) + 5, ldy = std::size_t(rows) + 2;
        const std::vector<W> w = random_matrix<W>(rows, cols, ld, seed++);
        const std::vector<X> x = random_matrix<X>(M, cols, ldx, seed++);
        std::vector<float> whole(std::size_t(M) * ldy, kYPad), by_row(std::size_t(M) * ldy, kYPad);
        matmul(w.data(), ld, x.data(), ldx, whole.data(), ldy, M, rows, cols);
        for (int r = 0; r < rows; ++r)
          matmul(w.data() + std::size_t(r) * ld, ld, x.data(), ldx, by_row.data() + r, ldy, M, 1, cols);
        for (int m = 0; m < M; ++m)
          for (int r = 0; r < rows; ++r)
            ASSERT_EQ(whole[std::size_t(m) * ldy + r], by_row[std::size_t(m) * ldy + r])
                << "M=" << M << " rows=" << rows << " cols=" << cols << " m=" << m << " r=" << r;
      }
}

TYPED_TEST(MatmulTest, PanelShapeDoesNotChangeTheSums) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  expect_panel_shape_does_not_change_sums<bf16_t, float>([](auto... a) { K::matmul(a...); });
  expect_panel_shape_does_not_change_sums<float, float>([](auto... a) { K::matmul(a...); });
  expect_panel_shape_does_not_change_sums<bf16_t, bf16_t>([](auto... a) { K::matmul_fast(a...); });
}

TYPED_TEST(MatmulTest, ZeroColumnsGiveZero) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  const float w[1] = {0.0f}, x[1] = {0.0f};
  std::vector<float> y(5 * 6, 3.0f);
  K::matmul(w, 0, x, 0, y.data(), 6, 5, 4, 0);
  for (int m = 0; m < 5; ++m)
    for (int r = 0; r < 6; ++r) EXPECT_EQ(y[m * 6 + r], r < 4 ? 0.0f : 3.0f);
}

}  // namespace
}  // namespace mi::kernels::test
