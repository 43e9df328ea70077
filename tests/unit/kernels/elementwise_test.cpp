// Element-wise and reduction kernels of every x86 level against the Scalar oracle. to_bf16 and add must be
// bit-identical; the others are held to error bounds derived from their operations (stated at each test).
#include "kernel_test_support.h"

namespace mi::kernels::test {
namespace {

const int kLengths[] = {1, 2, 7, 15, 16, 17, 33, 64, 255, 4097};

template <class K>
class ElementwiseTest : public ::testing::Test {};
TYPED_TEST_SUITE(ElementwiseTest, Levels);

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TYPED_TEST(ElementwiseTest, ToBf16IsBitIdentical) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  // Special values: signed zeros, subnormals, ties to even (0x..8000 with even and odd kept bit), values that
  // round up into the next binade or to infinity, infinities, quiet and signalling NaNs with payloads.
  std::vector<float> x;
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u, 0x3f808000u,
                     0x3f818000u, 0x3f80ffffu, 0x3fffffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u,
                     0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff812345u, 0x7fffffffu})
    x.push_back(from_bits(u));
  std::mt19937 gen(42);
  while (x.size() < 10000) x.push_back(from_bits(uint32_t(gen())));  // every exponent and sign, incl. NaN/inf
  for (int n : {1, 7, 16, 17, 33, 255, 10000}) {
    std::vector<bf16_t> y(std::size_t(n) + 1, bf16_t{0x1234}), ref(static_cast<std::size_t>(n));
    K::to_bf16(x.data(), y.data(), n);
    Scalar::to_bf16(x.data(), ref.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(y[i].bits, ref[i].bits) << "n=" << n << " i=" << i << " input bits 0x" << std::hex << bits_of(x[i]);
    ASSERT_EQ(y[n].bits, 0x1234) << "wrote past y[n - 1]";
  }
}

TYPED_TEST(ElementwiseTest, DotWithinSummationBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    const auto a = random_floats(std::size_t(n), -1.0f, 1.0f, uint32_t(n)), b = random_floats(std::size_t(n), -1.0f, 1.0f, uint32_t(n) + 1);
    double sum_abs = 0;
    for (int i = 0; i < n; ++i) sum_abs += std::fabs(double(a[i]) * b[i]);
    EXPECT_NEAR(K::dot(a.data(), b.data(), n), Scalar::dot(a.data(), b.data(), n), dot_bound(n, sum_abs)) << "n=" << n;
  }
}

// axpy: the level may fuse a*x + y (one rounding) where the scalar level rounds a*x first:
// |fma - fl(fl(ax) + y)| <= u|ax| + 2u(|ax| + |y|) < 2^-22 (|ax| + |y|).
TYPED_TEST(ElementwiseTest, AxpyWithinFusedMultiplyAddBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    const auto x = random_floats(std::size_t(n), -2.0f, 2.0f, uint32_t(n));
    const auto y0 = random_floats(std::size_t(n) + 1, -2.0f, 2.0f, uint32_t(n) + 1);
    const float a = 0.7310586f;
    std::vector<float> y = y0, ref = y0;
    K::axpy(a, x.data(), y.data(), n);
    Scalar::axpy(a, x.data(), ref.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(y[i], ref[i], 4.0 * kU * (std::fabs(double(a) * x[i]) + std::fabs(y0[i]))) << "n=" << n << " i=" << i;
    ASSERT_EQ(y[n], y0[n]) << "wrote past y[n - 1]";
  }
}

TYPED_TEST(ElementwiseTest, AddIsBitIdentical) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    const auto x = random_floats(std::size_t(n), -2.0f, 2.0f, uint32_t(n));
    const auto y0 = random_floats(std::size_t(n) + 1, -2.0f, 2.0f, uint32_t(n) + 1);
    std::vector<float> y = y0, ref = y0;
    K::add(x.data(), y.data(), n);
    Scalar::add(x.data(), ref.data(), n);
    for (int i = 0; i <= n; ++i) ASSERT_EQ(bits_of(y[i]), bits_of(ref[i])) << "n=" << n << " i=" << i;
  }
}

// rmsnorm: the sums of squares (all terms >= 0) differ by at most (n + 16) * 2^-23 relative (dot_bound); the
// mean, sqrt (halves it), reciprocal and two products add at most 5 roundings on each side, so
// |y - ref| <= ((n + 16) * 2^-23 + 10 * 2^-24) * |ref|.
TYPED_TEST(ElementwiseTest, RmsnormWithinSummationBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    const auto x = random_floats(std::size_t(n), -3.0f, 3.0f, uint32_t(n));
    const auto w = random_floats(std::size_t(n), 0.5f, 1.5f, uint32_t(n) + 1);
    std::vector<float> y(std::size_t(n) + 1, -7.0f), ref(static_cast<std::size_t>(n));
    K::rmsnorm(x.data(), w.data(), y.data(), n, 1e-6f);
    Scalar::rmsnorm(x.data(), w.data(), ref.data(), n, 1e-6f);
    const double rel = (n + 16) * 2.0 * kU + 10.0 * kU;
    for (int i = 0; i < n; ++i) ASSERT_NEAR(y[i], ref[i], rel * std::fabs(ref[i]) + 1e-30) << "n=" << n << " i=" << i;
    ASSERT_EQ(y[n], -7.0f) << "wrote past y[n - 1]";
  }
}

// silu_mul is exp element-wise, so this is the precision check of the vector exp against std::exp: inputs span
// [-100, 100], covering exp results from overflow (inf -> silu = -0) through subnormal. The level's exp is within
// 2 ulp and std::exp within 1 ulp; the division and products add 2 roundings each side, and 1 + e damps the exp
// error, so |out - ref| <= 8 * 2^-24 * |ref| (~4.8e-7 relative).
TYPED_TEST(ElementwiseTest, SiluMulMatchesStdExpWithinUlps) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    auto gate = random_floats(std::size_t(n), -100.0f, 100.0f, uint32_t(n));
    const auto small = random_floats(std::size_t(n), -4.0f, 4.0f, uint32_t(n) + 2);
    for (int i = 0; i < n; i += 2) gate[i] = small[i];  // half of the values where silu is not saturated
    const auto up = random_floats(std::size_t(n), -2.0f, 2.0f, uint32_t(n) + 1);
    std::vector<float> out(std::size_t(n) + 1, -7.0f), ref(static_cast<std::size_t>(n));
    K::silu_mul(gate.data(), up.data(), out.data(), n);
    Scalar::silu_mul(gate.data(), up.data(), ref.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(out[i], ref[i], 8.0 * kU * std::fabs(ref[i]) + 1e-38) << "n=" << n << " gate=" << gate[i];
    ASSERT_EQ(out[n], -7.0f) << "wrote past out[n - 1]";
  }
}

// Every exp result from a dense sweep, probed through silu_mul(g, 1) = g / (1 + exp(-g)): for g <= -17,
// 1 + exp(-g) rounds to exp(-g) itself, so the output carries the exp error directly.
TYPED_TEST(ElementwiseTest, VectorExpAccurateOverItsWholeRange) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  std::vector<float> g;
  for (float v = -88.5f; v <= -17.0f; v += 0.00390625f) g.push_back(v);
  const std::vector<float> ones(g.size(), 1.0f);
  std::vector<float> out(g.size()), ref(g.size());
  K::silu_mul(g.data(), ones.data(), out.data(), int(g.size()));
  Scalar::silu_mul(g.data(), ones.data(), ref.data(), int(g.size()));
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 8.0 * kU * std::fabs(ref[i])) << "g=" << g[i];
}

// softmax: exp (<= 3 ulp apart, see above) and the normalising sum of n positive terms (dot_bound, relative to
// the sum itself), then one reciprocal and one product: |y - ref| <= ((n + 16) * 2^-23 + 10 * 2^-24) * |ref|.
TYPED_TEST(ElementwiseTest, SoftmaxWithinSummationBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int n : kLengths) {
    const auto x0 = random_floats(std::size_t(n) + 1, -30.0f, 30.0f, uint32_t(n));
    std::vector<float> x = x0, ref = x0;
    K::softmax(x.data(), n);
    Scalar::softmax(ref.data(), n);
    const double rel = (n + 16) * 2.0 * kU + 10.0 * kU;
    double total = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(x[i], ref[i], rel * std::fabs(ref[i]) + 1e-38) << "n=" << n << " i=" << i;
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << "n=" << n;
    ASSERT_EQ(x[n], x0[n]) << "wrote past x[n - 1]";
  }
}

// rope: each output is a*c - b*s; the level may fuse one product into the subtraction:
// |diff| <= 2^-22 (|a c| + |b s|).
TYPED_TEST(ElementwiseTest, RopeRotateHalfWithinFusedMultiplyAddBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  for (int head_dim : {2, 14, 32, 34, 64, 128, 130}) {
    const int half = head_dim / 2;
    const auto x0 = random_floats(std::size_t(head_dim) + 1, -2.0f, 2.0f, uint32_t(head_dim));
    const auto angles = random_floats(std::size_t(half), -3.0f, 3.0f, uint32_t(head_dim) + 1);
    std::vector<float> cos(half), sin(half);
    for (int i = 0; i < half; ++i) {
      cos[i] = std::cos(angles[i]);
      sin[i] = std::sin(angles[i]);
    }
    std::vector<float> x = x0, ref = x0;
    K::rope_rotate_half(x.data(), cos.data(), sin.data(), head_dim);
    Scalar::rope_rotate_half(ref.data(), cos.data(), sin.data(), head_dim);
    for (int i = 0; i < half; ++i) {
      const double a = x0[i], b = x0[i + half];
      const double bound = 4.0 * kU * (std::fabs(a * cos[i]) + std::fabs(b * sin[i]));
      const double bound2 = 4.0 * kU * (std::fabs(b * cos[i]) + std::fabs(a * sin[i]));
      ASSERT_NEAR(x[i], ref[i], bound + 1e-38) << "head_dim=" << head_dim << " i=" << i;
      ASSERT_NEAR(x[i + half], ref[i + half], bound2 + 1e-38) << "head_dim=" << head_dim << " i=" << i + half;
    }
    ASSERT_EQ(x[head_dim], x0[head_dim]) << "wrote past x[head_dim - 1]";
  }
}

}  // namespace
}  // namespace mi::kernels::test
