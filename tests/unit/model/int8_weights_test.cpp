// int8 weights (components/model/int8_weights.h, ckb/contracts/int8_weights.toml): the quantisation formula on hand-
// picked rows (ties to even, the all-zero row, clamping), the refusal of non-finite weights, the linear layer
// against a double-precision product with the dequantised matrix, the release of a mapped range, and where the codes
// live (2 MiB-aligned weight memory).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/kernel_levels.h"
#include "model/int8_weights.h"

namespace {
using mi::bf16_t;
using mi::model::Int8Matrix;

TEST(Int8Weights, RowScaleIsMaxOver127AndCodesRoundHalfToEven) {
  mi::runtime::ThreadPool pool(2);
  // Row 0: max 127 -> scale exactly 1, so w / s is w: 2.5 -> 2 and -3.5 -> -4 (ties to even), 0.4 -> 0.
  // Row 1: all zero -> scale 0, codes 0. Row 2: max 1 -> scale 1/127 (f32), -1 -> -127, 0.5 -> rne(0.5 / s).
  const std::vector<float> w = {127.0f, 2.5f, -3.5f, 0.4f, 0.0f, 0.0f, 0.0f, 0.0f, -1.0f, 0.5f, 0.25f, 1e-30f};
  const Int8Matrix m = mi::model::quantize_int8(pool, w.data(), 3, 4, "w");
  EXPECT_EQ(m.scale[0], 1.0f);
  EXPECT_EQ(m.q[0], 127);
  EXPECT_EQ(m.q[1], 2);
  EXPECT_EQ(m.q[2], -4);
  EXPECT_EQ(m.q[3], 0);
  EXPECT_EQ(m.scale[1], 0.0f);
  for (int c = 4; c < 8; ++c) EXPECT_EQ(m.q[std::size_t(c)], 0);
  const float s2 = 1.0f / 127.0f;
  EXPECT_EQ(m.scale[2], s2);
  EXPECT_EQ(m.q[8], -127);
  EXPECT_EQ(m.q[9], int8_t(std::nearbyint(0.5f / s2)));
  EXPECT_EQ(m.q[10], int8_t(std::nearbyint(0.25f / s2)));
  EXPECT_EQ(m.q[11], 0);
}

TEST(Int8Weights, EveryElementWithinHalfAScaleAndNeverMinus128) {
  mi::runtime::ThreadPool pool(3);
  const int rows = 300, cols = 77;
  std::mt19937 gen(4);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<bf16_t> w(std::size_t(rows) * cols);
  for (auto& v : w) v = mi::f32_to_bf16(dist(gen));
  const Int8Matrix m = mi::model::quantize_int8(pool, w.data(), rows, cols, "w");
  for (int r = 0; r < rows; ++r) {
    float amax = 0;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(mi::bf16_to_f32(w[std::size_t(r) * cols + c])));
    ASSERT_EQ(m.scale[std::size_t(r)], amax / 127.0f) << r;
    for (int c = 0; c < cols; ++c) {
      const int8_t q = m.q[std::size_t(r) * cols + c];
      ASSERT_GE(q, -127);
      const double err = std::fabs(double(mi::bf16_to_f32(w[std::size_t(r) * cols + c])) - double(q) * m.scale[std::size_t(r)]);
      // half a step, plus the rounding of the f32 quotient w / s (|w / s| <= 127: < 127 * 2^-24 steps) before rne
      ASSERT_LE(err, (0.5 + 127.0 / 16777216.0) * m.scale[std::size_t(r)] * (1 + 1e-7)) << r << "," << c;
    }
  }
}

TEST(Int8Weights, NonFiniteWeightIsRefusedNamingTensorAndRow) {
  mi::runtime::ThreadPool pool(2);
  std::vector<float> w(4 * 8, 0.5f);
  w[2 * 8 + 3] = std::numeric_limits<float>::infinity();
  try {
    (void)mi::model::quantize_int8(pool, w.data(), 4, 8, "model.layers.0.mlp.up_proj.weight");
    FAIL() << "expected an error";
  } catch (const mi::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("row 2"), std::string::npos) << what;
  }
}

template <class K>
void check_linear(int M) {
  mi::runtime::ThreadPool pool(2);
  const int out = 70, in = 129;
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(std::size_t(out) * in), x(std::size_t(M) * in), y(std::size_t(M) * out);
  for (auto& v : w) v = dist(gen);
  for (auto& v : x) v = dist(gen);
  const Int8Matrix m = mi::model::quantize_int8(pool, w.data(), out, in, "w");
  mi::model::linear<K>(pool, &m, out, in, x.data(), M, y.data());
  for (int t = 0; t < M; ++t)
    for (int r = 0; r < out; ++r) {
      double exact = 0, sum_abs = 0;
      for (int c = 0; c < in; ++c) {
        const double p = double(m.q[std::size_t(r) * in + c]) * x[std::size_t(t) * in + c];
        exact += p;
        sum_abs += std::fabs(p);
      }
      exact *= m.scale[std::size_t(r)];
      ASSERT_NEAR(y[std::size_t(t) * out + r], exact, (in + 16) * 1.2e-7 * m.scale[std::size_t(r)] * sum_abs + 1e-7 * std::fabs(exact))
          << K::name << " M=" << M << " t=" << t << " r=" << r;
    }
}

// linear_parts() splits int8 layers like linear(): equal bitwise, and a matrix of the wrong shape is refused.
TEST(Int8Weights, LinearPartsEqualOneLinearEachAndCheckShapes) {
  mi::runtime::ThreadPool pool(3);
  const int in = 64, out_a = 33, out_b = 18, M = 4;
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> wa(std::size_t(out_a) * in), wb(std::size_t(out_b) * in), x(std::size_t(M) * in);
  for (auto* v : {&wa, &wb, &x})
    for (auto& e : *v) e = dist(gen);
  const Int8Matrix a = mi::model::quantize_int8(pool, wa.data(), out_a, in, "a");
  const Int8Matrix b = mi::model::quantize_int8(pool, wb.data(), out_b, in, "b");
  using K = mi::kernels::Scalar;
  std::vector<float> ya(std::size_t(M) * out_a), yb(std::size_t(M) * out_b), ya2(ya.size()), yb2(yb.size());
  mi::model::linear<K>(pool, &a, out_a, in, x.data(), M, ya.data());
  mi::model::linear<K>(pool, &b, out_b, in, x.data(), M, yb.data());
  mi::model::linear_parts<K>(pool, in, x.data(), M, mi::model::part(&a, out_a, ya2.data()),
                             mi::model::part(&b, out_b, yb2.data()));
  EXPECT_EQ(ya, ya2);
  EXPECT_EQ(yb, yb2);
  EXPECT_THROW(mi::model::linear_parts<K>(pool, in, x.data(), M, mi::model::part(&a, out_a + 1, ya2.data())),
               mi::Error);
}

TEST(Int8Weights, LinearIsScaleTimesIntegerDot) {
  for (int M : {1, 2, 5}) {
    check_linear<mi::kernels::Scalar>(M);
    if (mi::kernels::cpu_supports(mi::kernels::Level::avx512)) check_linear<mi::kernels::Avx512>(M);
    if (mi::kernels::cpu_supports(mi::kernels::Level::avx2)) check_linear<mi::kernels::Avx2>(M);
  }
}

TEST(Int8Weights, ReleasedMappedRangeReadsBackTheFile) {
  char path[] = "/tmp/mi-int8-release-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::size_t n = 5 * std::size_t(sysconf(_SC_PAGESIZE)) + 123;
  std::vector<unsigned char> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
  ASSERT_EQ(write(fd, data.data(), n), ssize_t(n));
  void* map = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  const auto* p = static_cast<const unsigned char*>(map);
  ASSERT_EQ(p[n - 1], data[n - 1]);
  mi::model::release_mapped_range(p + 100, n - 200);  // not page aligned: only the pages wholly inside are dropped
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], data[i]) << i;
  munmap(map, n);
  close(fd);
  unlink(path);
}

// The quantised codes live in weight memory (resident_weights.h allocate_weight_array): a matrix of 2 MiB or more
// starts on a 2 MiB boundary, where its whole extents can be huge pages, as the bf16 engines' copied matrices do.
TEST(Int8Weights, LargeMatrixCodesStartOnATwoMebibyteBoundary) {
  mi::runtime::ThreadPool pool(2);
  const int rows = 1024 + 3, cols = 2048;
  std::vector<float> w(std::size_t(rows) * cols);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 255) - 127) / 64.0f;
  const Int8Matrix m = mi::model::quantize_int8(pool, w.data(), rows, cols, "w");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.q.get()) % (std::size_t(2) << 20), 0u);
  EXPECT_EQ(m.q[std::size_t(rows) * cols - 1], int8_t(std::nearbyint(w.back() / m.scale[rows - 1])));
}

}  // namespace
