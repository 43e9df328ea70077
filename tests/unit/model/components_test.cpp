// Every model component against a straightforward double-precision computation on synthetic data, at every
// kernel level the CPU supports.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

#include "common/error.h"
#include "kernel_levels.h"
#include "model/attention.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/lm_head.h"
#include "model/rms_norm.h"
#include "model/rotary.h"
#include "model/scratch_arena.h"
#include "model/swiglu_mlp.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::bf16_t;
using mi::model::Numerics;
using mi::runtime::ThreadPool;

// One typed suite per component (named as the CKB contracts' test filters: RmsNorm*, Rope*, Attention*, ...).
template <class K>
class LinearLevels : public ::testing::Test {};
TYPED_TEST_SUITE(LinearLevels, mi_test::KernelLevels, mi_test::KernelLevelName);
template <class K>
class RmsNormLevels : public ::testing::Test {};
TYPED_TEST_SUITE(RmsNormLevels, mi_test::KernelLevels, mi_test::KernelLevelName);
template <class K>
class RopeLevels : public ::testing::Test {};
TYPED_TEST_SUITE(RopeLevels, mi_test::KernelLevels, mi_test::KernelLevelName);
template <class K>
class AttentionLevels : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionLevels, mi_test::KernelLevels, mi_test::KernelLevelName);
template <class K>
class MlpLevels : public ::testing::Test {};
TYPED_TEST_SUITE(MlpLevels, mi_test::KernelLevels, mi_test::KernelLevelName);
template <class K>
class LmHeadLevels : public ::testing::Test {};
TYPED_TEST_SUITE(LmHeadLevels, mi_test::KernelLevels, mi_test::KernelLevelName);

// ---- linear ---------------------------------------------------------------------------------------------------
// f32 accumulation of `cols` products: error <= ~cols * 2^-24 * sum|w x| (worst case); 1e-6 * sum|wx| * 4
// leaves room for any summation order over cols <= 200.
TYPED_TEST(LinearLevels, PreciseAndFastMatchDoubleAndAreThreadCountIndependent) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  const int rows = 37, cols = 70;
  const auto w = mi_test::random_bf16(std::size_t(rows) * cols, 1);
  for (int M : {1, 5}) {
    const auto x = mi_test::random_floats(std::size_t(M) * cols, 2);
    std::vector<double> ref, mag;
    std::vector<float> y1(std::size_t(M) * rows), y3(y1.size());
    ThreadPool pool1(1), pool3(3);

    mi_test::reference_linear(w.data(), rows, cols, x.data(), M, ref, mag);
    mi::model::linear<K>(pool1, w.data(), rows, cols, x.data(), M, y1.data());
    mi::model::linear<K>(pool3, w.data(), rows, cols, x.data(), M, y3.data());
    for (std::size_t i = 0; i < y1.size(); ++i) {
      ASSERT_NEAR(y1[i], ref[i], 4e-6 * mag[i] + 1e-30) << "precise M=" << M << " i=" << i;
      ASSERT_EQ(y1[i], y3[i]) << "thread count changed the result";
    }

    // fast: the reference uses the bf16-rounded activations, so only accumulation error remains.
    std::vector<bf16_t> xb(x.size());
    const bf16_t* xin = mi::model::matmul_input<K, Numerics::fast>(pool3, x.data(), x.size(), xb.data());
    const auto xr = mi_test::bf16_rounded(x.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(mi::bf16_to_f32(xin[i]), xr[i]);
    mi_test::reference_linear(w.data(), rows, cols, xr.data(), M, ref, mag);
    mi::model::linear<K>(pool3, w.data(), rows, cols, xin, M, y3.data());
    for (std::size_t i = 0; i < y3.size(); ++i) ASSERT_NEAR(y3[i], ref[i], 4e-6 * mag[i] + 1e-30) << "fast " << i;
  }
}

TYPED_TEST(LinearLevels, F32Weights) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  const int rows = 20, cols = 33, M = 3;
  const auto w = mi_test::random_floats(std::size_t(rows) * cols, 3);
  const auto x = mi_test::random_floats(std::size_t(M) * cols, 4);
  std::vector<double> ref, mag;
  mi_test::reference_linear(w.data(), rows, cols, x.data(), M, ref, mag);
  std::vector<float> y(std::size_t(M) * rows);
  ThreadPool pool(2);
  mi::model::linear<K>(pool, w.data(), rows, cols, x.data(), M, y.data());
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 4e-6 * mag[i]);
}

// Several layers sharing one input in one dispatch (q/k/v, gate/up) equal one linear() each, bitwise: part sizes
// that are not multiples of the row unit make blocks span two parts; 1 and 3 threads, decode and batched shapes.
TYPED_TEST(LinearLevels, PartsInOneDispatchEqualOneLinearEach) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  const int cols = 96;
  const int rows[3] = {40, 7, 23};
  std::vector<std::vector<bf16_t>> w;
  for (int p = 0; p < 3; ++p) w.push_back(mi_test::random_bf16(std::size_t(rows[p]) * cols, 10 + p));
  for (int threads : {1, 3})
    for (int M : {1, 3, 8, 20}) {
      ThreadPool pool(threads);
      const auto x = mi_test::random_floats(std::size_t(M) * cols, 20 + M);
      std::vector<std::vector<float>> alone(3), together(3);
      for (int p = 0; p < 3; ++p) {
        alone[p].assign(std::size_t(M) * rows[p], 0.0f);
        together[p].assign(std::size_t(M) * rows[p], -1.0f);
        mi::model::linear<K>(pool, w[p].data(), rows[p], cols, x.data(), M, alone[p].data());
      }
      mi::model::linear_parts<K>(pool, cols, x.data(), M, mi::model::part(w[0].data(), rows[0], together[0].data()),
                                 mi::model::part(w[1].data(), rows[1], together[1].data()),
                                 mi::model::part(w[2].data(), rows[2], together[2].data()));
      for (int p = 0; p < 3; ++p) ASSERT_EQ(alone[p], together[p]) << "part " << p << " M=" << M << " threads=" << threads;
    }
}

// ---- embedding -----------------------------------------------------------------------------------------------
TEST(Embedding, CopiesRowsExactlyAndRejectsBadIds) {
  const int vocab = 11, hidden = 6;
  const auto table = mi_test::random_bf16(std::size_t(vocab) * hidden, 5);
  const int ids[] = {3, 0, 10, 3};
  std::vector<float> out(4 * hidden);
  mi::model::embed_tokens(table.data(), vocab, hidden, ids, 4, out.data());
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < hidden; ++i)
      EXPECT_EQ(out[std::size_t(t) * hidden + i], mi::bf16_to_f32(table[std::size_t(ids[t]) * hidden + i]));
  const int bad[] = {1, 11};
  EXPECT_THROW(mi::model::embed_tokens(table.data(), vocab, hidden, bad, 2, out.data()), mi::Error);
  const int negative[] = {-1};
  EXPECT_THROW(mi::model::embed_tokens(table.data(), vocab, hidden, negative, 1, out.data()), mi::Error);
}

// ---- RMSNorm ---------------------------------------------------------------------------------------------------
TYPED_TEST(RmsNormLevels, RowsAndPerHead) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const int rows = 5, hidden = 96;
  const auto x = mi_test::random_floats(std::size_t(rows) * hidden, 6, 3.0f);
  const auto wb = mi_test::random_bf16(hidden, 7);
  const std::vector<float> w = mi::model::widen_norm_weight(wb.data(), hidden);
  for (int i = 0; i < hidden; ++i) ASSERT_EQ(w[std::size_t(i)], mi::bf16_to_f32(wb[std::size_t(i)]));
  std::vector<float> y(x.size());
  mi::model::rms_norm_rows<K>(pool, x.data(), w.data(), y.data(), rows, hidden, 1e-6f);
  for (int r = 0; r < rows; ++r) {
    const auto ref = mi_test::reference_rms_norm(x.data() + r * hidden, w.data(), hidden, 1e-6);
    for (int i = 0; i < hidden; ++i)
      ASSERT_NEAR(y[std::size_t(r) * hidden + i], ref[std::size_t(i)], 2e-6 * std::fabs(ref[std::size_t(i)]) + 1e-7);
  }
  // Per head: 3 heads of 32, one shared weight of 32.
  const int heads = 3, head_dim = 32;
  mi::model::head_rms_norm<K>(pool, x.data(), w.data(), y.data(), rows, heads, head_dim, 1e-6f);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const std::size_t off = std::size_t(r) * hidden + std::size_t(h) * head_dim;
      const auto ref = mi_test::reference_rms_norm(x.data() + off, w.data(), head_dim, 1e-6);
      for (int i = 0; i < head_dim; ++i)
        ASSERT_NEAR(y[off + i], ref[std::size_t(i)], 2e-6 * std::fabs(ref[std::size_t(i)]) + 1e-7);
    }
}

// ---- rotary ----------------------------------------------------------------------------------------------------
TEST(Rope, InverseFrequenciesFollowTheFormula) {
  const auto f = mi::model::rotary_inv_freq(64, 1e6, std::nullopt);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[std::size_t(i)], std::exp(-std::log(1e6) * (2.0 * i) / 64.0), 1e-15);
  EXPECT_THROW(mi::model::rotary_inv_freq(31, 1e4, std::nullopt), mi::Error);
  EXPECT_THROW(mi::model::rotary_inv_freq(32, -1, std::nullopt), mi::Error);
}

// Llama 3.1 (8B) settings: theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192.
// Checked region by region against the published rule: wavelengths shorter than 8192/4 = 2048 keep their
// frequency, longer than 8192/1 are divided by 8, in between the frequency is interpolated linearly in
// (8192 / wavelength) between f/8 (at 1) and f (at 4).
TEST(Rope, Llama3FrequencyScaling) {
  const mi::model::Llama3RopeScaling s{8.0, 1.0, 4.0, 8192};
  const auto plain = mi::model::rotary_inv_freq(128, 500000.0, std::nullopt);
  const auto scaled = mi::model::rotary_inv_freq(128, 500000.0, s);
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const double wavelength = 2 * std::numbers::pi / plain[i];
    if (wavelength < 2048) {
      EXPECT_EQ(scaled[i], plain[i]);
      ++kept;
    } else if (wavelength > 8192) {
      EXPECT_NEAR(scaled[i], plain[i] / 8, 1e-18);
      ++divided;
    } else {
      const double ratio = 8192 / wavelength;  // in [1, 4]
      const double t = (ratio - 1) / 3;
      EXPECT_NEAR(scaled[i], plain[i] / 8 + t * (plain[i] - plain[i] / 8), 1e-15 * plain[i]);
      EXPECT_LE(scaled[i], plain[i]);
      EXPECT_GE(scaled[i], plain[i] / 8);
      ++blended;
    }
  }
  // All three regions occur for these settings.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(scaled[0], 1.0);  // i = 0: frequency 1, wavelength 2*pi
  // The table a scaled model uses holds the scaled frequencies.
  const mi::model::RotaryTable table(128, 100, 500000.0, s);
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    EXPECT_NEAR(table.cos(99)[i], std::cos(99 * scaled[i]), 2e-5) << i;
    EXPECT_NEAR(table.sin(99)[i], std::sin(99 * scaled[i]), 2e-5) << i;
  }
  EXPECT_THROW(mi::model::rotary_inv_freq(128, 5e5, mi::model::Llama3RopeScaling{8.0, 4.0, 1.0, 8192}), mi::Error);
}

TYPED_TEST(RopeLevels, RotatesEveryHeadAtItsPosition) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  for (int head_dim : {32, 64, 128}) {
    const int heads = 3, rows = 6, first = 300, max_pos = 512;
    const double theta = 1e6;
    const mi::model::RotaryTable table(head_dim, max_pos, theta, std::nullopt);
    const std::size_t stride = std::size_t(heads) * head_dim + 5;  // padded rows
    auto x = mi_test::random_floats(std::size_t(rows) * stride, 8);
    const auto x0 = x;
    mi::model::apply_rotary<K>(pool, table, x.data(), rows, stride, heads, head_dim, first);
    const int half = head_dim / 2;
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        const std::size_t o = std::size_t(r) * stride + std::size_t(h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const double angle = double(first + r) * std::pow(theta, -2.0 * i / head_dim);
          const double a = x0[o + i], b = x0[o + i + half];
          // f32 angle: |pos * inv_freq| <= 305 has an f32 rounding of ~2e-5, hence the tolerance.
          ASSERT_NEAR(x[o + i], a * std::cos(angle) - b * std::sin(angle), 1e-4);
          ASSERT_NEAR(x[o + i + half], b * std::cos(angle) + a * std::sin(angle), 1e-4);
        }
      }
      for (std::size_t pad = std::size_t(heads) * head_dim; pad < stride; ++pad)
        ASSERT_EQ(x[std::size_t(r) * stride + pad], x0[std::size_t(r) * stride + pad]);  // padding untouched
    }
    EXPECT_THROW(mi::model::apply_rotary<K>(pool, table, x.data(), rows, stride, heads, head_dim, 510), mi::Error);
  }
}

// ---- attention -------------------------------------------------------------------------------------------------

TYPED_TEST(AttentionLevels, MatchesDoubleForGqaRatiosAndHeadDims) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(3);
  const int n = 13;
  for (int head_dim : {32, 64, 128}) {
    for (int ratio : {1, 2, 4, 8}) {
      const int kv_heads = ratio == 8 ? 1 : 2, heads = kv_heads * ratio;
      const auto q = mi_test::random_floats(std::size_t(n) * heads * head_dim, 10, 0.5f);
      const auto k = mi_test::random_floats(std::size_t(n) * kv_heads * head_dim, 11, 0.5f);
      const auto v = mi_test::random_floats(std::size_t(n) * kv_heads * head_dim, 12);
      const auto ref = mi_test::reference_attention(q, k, v, n, heads, kv_heads, head_dim);

      mi::runtime::KvCache cache({2, kv_heads, head_dim, 1, 32, 4});
      const int seq = cache.allocate_sequence();
      const int layer = 1;
      const mi::model::AttentionDims dims{heads, kv_heads, head_dim};
      std::vector<float> scores(mi::model::attention_scratch_floats(pool.size(), 32));
      std::vector<float> out(q.size());
      const int start = cache.append(seq, n);
      mi::model::store_kv<K>(cache, seq, layer, start, n, k.data(), v.data(), kv_heads, head_dim);
      mi::model::causal_attention<K>(pool, cache, seq, layer, dims, q.data(), n, 0, out.data(), scores.data());
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 2e-5) << "head_dim " << head_dim << " ratio " << ratio << " i " << i;
    }
  }
}

// Prefill of 7 tokens, then 3 single-token decodes, then a 3-token prefill on top of the cache: every output
// equals one causal pass over all 13 tokens, bit for bit (each query's computation is the same either way).
// Also with spans of 16, 24 and 32 positions and head dims 64, 80, 128 and 528: a prefill's query block is scored
// span by span with each query's own key count (the prepared forms, diagonal span included; 24 = a full 16-key
// block plus a tail, 80 = a multiple of 16 but not of 64, 528 = above the prepared forms' limit, so the one-query
// kernel), its values summed by the multi-query kernels over whole spans and one by one after them. Sequences of
// 260 to 300 positions put decode steps across several block groups (the decode walk goes group by group, head by
// head within one), with groups of 128 and 120 positions, a thread walking 1, 3 or 4 KV heads, and steps whose
// length is exactly one and two windows.
TYPED_TEST(AttentionLevels, PrefillThenDecodeEqualsFullRecompute) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  struct Case {
    int n, head_dim, block_size;
    std::vector<int> steps;  // prefill / decode lengths, summing to n
    int kv_heads = 2;        // two query heads each; a decode step gives each of the 2 threads kv_heads / 2 of them
  };
  for (const Case& c : {Case{13, 32, 4, {7, 1, 1, 1, 3}}, Case{70, 128, 16, {37, 1, 1, 20, 1, 10}},
                        Case{70, 64, 32, {50, 1, 19}}, Case{70, 80, 24, {30, 1, 39}},
                        Case{40, 528, 16, {21, 1, 18}}, Case{300, 32, 16, {130, 1, 1, 120, 1, 47}},
                        Case{260, 64, 24, {129, 1, 128, 1, 1}}, Case{300, 32, 16, {140, 1, 150, 1, 8}, 8},
                        Case{270, 32, 24, {121, 1, 1, 146, 1}, 6}, Case{256, 32, 16, {127, 1, 127, 1}, 8}}) {
    const int n = c.n, kv_heads = c.kv_heads, heads = 2 * kv_heads, head_dim = c.head_dim;
    const std::size_t qrow = std::size_t(heads) * head_dim, kvrow = std::size_t(kv_heads) * head_dim;
    const auto q = mi_test::random_floats(n * qrow, 20);
    const auto k = mi_test::random_floats(n * kvrow, 21);
    const auto v = mi_test::random_floats(n * kvrow, 22);
    const mi::model::AttentionDims dims{heads, kv_heads, head_dim};
    std::vector<float> scores(mi::model::attention_scratch_floats(pool.size(), n));

    mi::runtime::KvCache full_cache({1, kv_heads, head_dim, 2, n, c.block_size});
    const int full = full_cache.allocate_sequence();
    std::vector<float> expected(n * qrow);
    full_cache.append(full, n);
    mi::model::store_kv<K>(full_cache, full, 0, 0, n, k.data(), v.data(), kv_heads, head_dim);
    mi::model::causal_attention<K>(pool, full_cache, full, 0, dims, q.data(), n, 0, expected.data(), scores.data());

    // A second sequence in another cache, filled step by step (another sequence alive first, so blocks interleave).
    mi::runtime::KvCache cache({1, kv_heads, head_dim, 2, n, c.block_size});
    const int other = cache.allocate_sequence();
    const int seq = cache.allocate_sequence();
    std::vector<float> got(n * qrow);
    for (int steps : c.steps) {
      cache.append(other, 1);
      const int start = cache.append(seq, steps);
      mi::model::store_kv<K>(cache, seq, 0, start, steps, k.data() + start * kvrow, v.data() + start * kvrow,
                             kv_heads, head_dim);
      mi::model::causal_attention<K>(pool, cache, seq, 0, dims, q.data() + start * qrow, steps, start,
                                     got.data() + start * qrow, scores.data());
    }
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], expected[i]) << "n=" << n << " head_dim=" << head_dim << " kv_heads " << kv_heads << " block "
                                     << c.block_size << " at " << i;
  }
}

// Batched decode: B sequences of different lengths (their blocks interleaved in the pool), each row's output equals
// causal_attention over that sequence alone, bit for bit, for GQA shapes where an item walks 1, 2, 4 KV heads and
// where one KV head has more query heads than one walk holds.
TYPED_TEST(AttentionLevels, BatchedDecodeEqualsEachSequenceAlone) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  struct Shape { int heads, kv_heads; };
  for (const Shape sh : {Shape{16, 8}, Shape{6, 3}, Shape{8, 2}, Shape{4, 4}, Shape{34, 1}, Shape{40, 2}}) {
    const int head_dim = 32, B = 3, layers = 2, layer = 1, block = 4, max_context = 40;
    const int lengths[B] = {1, 9, 23};
    const mi::model::AttentionDims dims{sh.heads, sh.kv_heads, head_dim};
    const std::size_t qrow = std::size_t(sh.heads) * head_dim, kvrow = std::size_t(sh.kv_heads) * head_dim;
    mi::runtime::KvCache cache({layers, sh.kv_heads, head_dim, B, max_context, block});
    int seqs[B];
    for (int b = 0; b < B; ++b) seqs[b] = cache.allocate_sequence();
    // Fill round-robin, a few positions at a time, so the sequences' blocks interleave in the pool.
    uint32_t seed = 40;
    for (int p = 0; p < 23; p += 3)
      for (int b = 0; b < B; ++b) {
        const int n = std::min(3, lengths[b] - p);
        if (n <= 0) continue;
        const int start = cache.append(seqs[b], n);
        const auto k = mi_test::random_floats(std::size_t(n) * kvrow, seed++);
        const auto v = mi_test::random_floats(std::size_t(n) * kvrow, seed++);
        mi::model::store_kv<K>(cache, seqs[b], layer, start, n, k.data(), v.data(), sh.kv_heads, head_dim);
      }
    const auto q = mi_test::random_floats(B * qrow, seed++, 0.7f);
    std::vector<float> scores(mi::model::attention_scratch_floats(pool.size(), max_context));
    std::vector<float> batched(B * qrow, -1.0f), alone(qrow);
    mi::model::decode_attention_batch<K>(pool, cache, seqs, B, layer, dims, q.data(), batched.data(), scores.data());
    for (int b = 0; b < B; ++b) {
      mi::model::causal_attention<K>(pool, cache, seqs[b], layer, dims, q.data() + b * qrow, 1, lengths[b] - 1,
                                     alone.data(), scores.data());
      for (std::size_t i = 0; i < qrow; ++i)
        ASSERT_EQ(batched[b * qrow + i], alone[i]) << "heads " << sh.heads << " kv " << sh.kv_heads << " row " << b
                                                   << " i " << i;
    }
  }
}

// Fast numerics' bf16 KV cache: store_kv rounds the rows to bf16 once, and attention over them (a prefill, then a
// decode step, then a batched decode of three sequences) equals, bit for bit, attention over an f32 cache holding the
// same rounded values: the only change is the rounding of the stored keys and values.
TYPED_TEST(AttentionLevels, Bf16CacheEqualsF32CacheOfTheRoundedValues) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const int heads = 8, kv_heads = 2, head_dim = 64, B = 3, max_context = 40, block = 4;
  const int lengths[B] = {5, 17, 30};
  const mi::model::AttentionDims dims{heads, kv_heads, head_dim};
  const std::size_t qrow = std::size_t(heads) * head_dim, kvrow = std::size_t(kv_heads) * head_dim;
  mi::runtime::KvCacheShape shape{1, kv_heads, head_dim, B, max_context, block};
  mi::runtime::KvCache f32_cache(shape);
  shape.dtype = mi::runtime::KvDtype::bf16;
  mi::runtime::KvCache bf16_cache(shape);
  std::vector<float> scores(mi::model::attention_scratch_floats(pool.size(), max_context));
  int f32_seqs[B], bf16_seqs[B];
  uint32_t seed = 70;
  for (int b = 0; b < B; ++b) {
    f32_seqs[b] = f32_cache.allocate_sequence();
    bf16_seqs[b] = bf16_cache.allocate_sequence();
    const int n = lengths[b] - 1;  // prefill all but the last position, then decode it
    const auto q = mi_test::random_floats(std::size_t(lengths[b]) * qrow, seed++, 0.7f);
    const auto k = mi_test::random_floats(std::size_t(lengths[b]) * kvrow, seed++);
    const auto v = mi_test::random_floats(std::size_t(lengths[b]) * kvrow, seed++);
    const auto k_rounded = mi_test::bf16_rounded(k.data(), k.size());
    const auto v_rounded = mi_test::bf16_rounded(v.data(), v.size());
    for (const auto& [start, T] : {std::pair{0, n}, std::pair{n, 1}}) {
      std::vector<float> expected(std::size_t(T) * qrow), got(std::size_t(T) * qrow, -1.0f);
      f32_cache.append(f32_seqs[b], T);
      bf16_cache.append(bf16_seqs[b], T);
      const std::size_t at = std::size_t(start) * kvrow;
      mi::model::store_kv<K>(f32_cache, f32_seqs[b], 0, start, T, k_rounded.data() + at, v_rounded.data() + at,
                             kv_heads, head_dim);
      mi::model::store_kv<K, mi::bf16_t>(bf16_cache, bf16_seqs[b], 0, start, T, k.data() + at, v.data() + at, kv_heads,
                                         head_dim);
      const float* qs = q.data() + std::size_t(start) * qrow;
      mi::model::causal_attention<K>(pool, f32_cache, f32_seqs[b], 0, dims, qs, T, start, expected.data(), scores.data());
      mi::model::causal_attention<K, mi::bf16_t>(pool, bf16_cache, bf16_seqs[b], 0, dims, qs, T, start, got.data(),
                                                 scores.data());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], expected[i]) << "sequence " << b << " start " << start << " T " << T << " i " << i;
    }
  }
  // One more token for every sequence, decoded together.
  const auto q = mi_test::random_floats(B * qrow, seed++, 0.7f);
  const auto k = mi_test::random_floats(B * kvrow, seed++);
  const auto v = mi_test::random_floats(B * kvrow, seed++);
  const auto k_rounded = mi_test::bf16_rounded(k.data(), k.size());
  const auto v_rounded = mi_test::bf16_rounded(v.data(), v.size());
  for (int b = 0; b < B; ++b) {
    const int start = f32_cache.append(f32_seqs[b], 1);
    bf16_cache.append(bf16_seqs[b], 1);
    mi::model::store_kv<K>(f32_cache, f32_seqs[b], 0, start, 1, k_rounded.data() + b * kvrow,
                           v_rounded.data() + b * kvrow, kv_heads, head_dim);
    mi::model::store_kv<K, mi::bf16_t>(bf16_cache, bf16_seqs[b], 0, start, 1, k.data() + b * kvrow, v.data() + b * kvrow,
                                       kv_heads, head_dim);
  }
  std::vector<float> expected(B * qrow), got(B * qrow, -1.0f);
  mi::model::decode_attention_batch<K>(pool, f32_cache, f32_seqs, B, 0, dims, q.data(), expected.data(), scores.data());
  mi::model::decode_attention_batch<K, mi::bf16_t>(pool, bf16_cache, bf16_seqs, B, 0, dims, q.data(), got.data(),
                                                   scores.data());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "batched row " << i / qrow;
  // Reading a cache as the other element type is refused before any work.
  std::vector<float> out(qrow);
  EXPECT_THROW(mi::model::causal_attention<K>(pool, bf16_cache, bf16_seqs[0], 0, dims, q.data(), 1, lengths[0],
                                              out.data(), scores.data()),
               mi::Error);
  const auto bf16_reads_f32_cache = [&] {
    mi::model::decode_attention_batch<K, mi::bf16_t>(pool, f32_cache, f32_seqs, 1, 0, dims, q.data(), out.data(),
                                                     scores.data());
  };
  EXPECT_THROW(bf16_reads_f32_cache(), mi::Error);
}

// The prefill's store_kv, its tokens split across the pool in runs that end on KV block-group boundaries, writes every
// key and value row exactly as the one-thread store_kv does (f32 copies and bf16 roundings), whatever the pool size,
// the block size (groups of 8, 2 and 1 blocks), the start position (inside a group or on its boundary) and the token
// count (within one group it stays on one thread; 255-300 tokens cross one or two boundaries, except from a group's
// start with blocks of 256, where 255 and 256 tokens stay within one group).
TEST(Attention, PooledStoreKvEqualsTheOneThreadStore) {
  using K = mi::kernels::Scalar;
  const int layers = 2, kv_heads = 2, head_dim = 24, max_context = 600;
  static_assert(mi::runtime::kGroupPositions == 128, "the start positions below sit on and off 128-position groups");
  const std::size_t row = std::size_t(kv_heads) * head_dim;
  for (int block : {16, 64, 256})
    for (int threads : {1, 2, 3})
      for (int first : {0, 3, 128, 130})
        for (int T : {1, 7, 64, 255, 256, 300}) {
          ThreadPool pool(threads);
          const auto k = mi_test::random_floats(std::size_t(T) * row, 40 + T);
          const auto v = mi_test::random_floats(std::size_t(T) * row, 80 + T);
          const auto check = [&](auto element) {
            using E = decltype(element);
            const auto dtype = mi::runtime::kv_dtype_of<E>();
            mi::runtime::KvCache pooled({layers, kv_heads, head_dim, 1, max_context, block, 0, dtype});
            mi::runtime::KvCache alone({layers, kv_heads, head_dim, 1, max_context, block, 0, dtype});
            ASSERT_EQ(pooled.group_positions(), std::max(block, mi::runtime::kGroupPositions));
            const int a = pooled.allocate_sequence(), b = alone.allocate_sequence();
            pooled.append(a, first + T);
            alone.append(b, first + T);
            mi::model::store_kv<K, E>(pool, pooled, a, 1, first, T, k.data(), v.data(), kv_heads, head_dim);
            mi::model::store_kv<K, E>(alone, b, 1, first, T, k.data(), v.data(), kv_heads, head_dim);
            for (int pos = 0; pos < first + T; ++pos)
              for (int h = 0; h < kv_heads; ++h)
                for (int i = 0; i < head_dim; ++i) {
                  const auto bits = [](E x) {
                    if constexpr (std::is_same_v<E, float>) return std::bit_cast<std::uint32_t>(x);
                    else return std::uint32_t(x.bits);
                  };
                  ASSERT_EQ(bits(pooled.key<E>(a, 1, h, pos)[i]), bits(alone.key<E>(b, 1, h, pos)[i]))
                      << "block " << block << " threads " << threads << " first " << first << " T " << T << " pos " << pos;
                  ASSERT_EQ(bits(pooled.value<E>(a, 1, h, pos)[i]), bits(alone.value<E>(b, 1, h, pos)[i]))
                      << "block " << block << " threads " << threads << " first " << first << " T " << T << " pos " << pos;
                }
          };
          check(float{});
          check(bf16_t{});
        }
}

TEST(Attention, RejectsInconsistentShapes) {
  ThreadPool pool(1);
  mi::runtime::KvCache cache({1, 2, 8, 1, 8, 4});
  const int seq = cache.allocate_sequence();
  std::vector<float> q(64), out(64), scores(8);
  EXPECT_THROW(mi::model::causal_attention<mi::kernels::Scalar>(pool, cache, seq, 0, {3, 2, 8}, q.data(), 1, 0,
                                                                out.data(), scores.data()),
               mi::Error);  // 3 heads over 2 kv heads
  EXPECT_THROW(mi::model::causal_attention<mi::kernels::Scalar>(pool, cache, seq, 0, {4, 2, 8}, q.data(), 1, 0,
                                                                out.data(), scores.data()),
               mi::Error);  // position 0 not appended
}

// ---- SwiGLU MLP --------------------------------------------------------------------------------------------
TYPED_TEST(MlpLevels, SwigluPreciseAndFast) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const int hidden = 48, inter = 80, M = 3;
  const auto gate = mi_test::random_bf16(std::size_t(inter) * hidden, 30, 0.2f);
  const auto up = mi_test::random_bf16(std::size_t(inter) * hidden, 31, 0.2f);
  const auto down = mi_test::random_bf16(std::size_t(hidden) * inter, 32, 0.2f);
  const auto x = mi_test::random_floats(std::size_t(M) * hidden, 33);

  auto reference = [&](bool round_to_bf16) {
    const std::vector<float> xs = round_to_bf16 ? mi_test::bf16_rounded(x.data(), x.size()) : x;
    std::vector<double> g, u, mag;
    mi_test::reference_linear(gate.data(), inter, hidden, xs.data(), M, g, mag);
    mi_test::reference_linear(up.data(), inter, hidden, xs.data(), M, u, mag);
    std::vector<float> act(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) act[i] = float(g[i] / (1 + std::exp(-g[i])) * u[i]);
    if (round_to_bf16) act = mi_test::bf16_rounded(act.data(), act.size());
    std::vector<double> y;
    mi_test::reference_linear(down.data(), hidden, inter, act.data(), M, y, mag);
    return y;
  };

  std::vector<float> g(std::size_t(M) * inter), u(g.size()), a(g.size()), out(std::size_t(M) * hidden);
  {
    const mi::model::MlpScratch<Numerics::precise> s{g.data(), u.data(), a.data(), nullptr, nullptr};
    mi::model::swiglu_mlp<K, Numerics::precise>(pool, gate.data(), up.data(), down.data(), hidden, inter, x.data(),
                                                M, out.data(), s);
    const auto ref = reference(false);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5) << i;
  }
  {
    std::vector<bf16_t> xb(x.size()), ab(g.size());
    const mi::model::MlpScratch<Numerics::fast> s{g.data(), u.data(), a.data(), xb.data(), ab.data()};
    mi::model::swiglu_mlp<K, Numerics::fast>(pool, gate.data(), up.data(), down.data(), hidden, inter, x.data(), M,
                                             out.data(), s);
    const auto ref = reference(true);
    // The activation product can round to the neighbouring bf16 value when f32 and double straddle a rounding
    // boundary: one bf16 ulp (2^-8 relative) of one |act| <~ 1 times |down| <~ 0.6 bounds that at ~3e-3.
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 3e-3) << i;
  }
}

// ---- LM head ---------------------------------------------------------------------------------------------------
TYPED_TEST(LmHeadLevels, LogitsAndGreedyToken) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  ThreadPool pool(2);
  const int vocab = 50, hidden = 24;
  const auto table = mi_test::random_bf16(std::size_t(vocab) * hidden, 40);
  const auto x = mi_test::random_floats(hidden, 41);
  std::vector<double> ref, mag;
  mi_test::reference_linear(table.data(), vocab, hidden, x.data(), 1, ref, mag);
  std::vector<float> logits(vocab);
  mi::model::lm_head<K>(pool, table.data(), vocab, hidden, x.data(), 1, logits.data());
  int best = 0;
  for (int i = 0; i < vocab; ++i) {
    ASSERT_NEAR(logits[std::size_t(i)], ref[std::size_t(i)], 4e-6 * mag[std::size_t(i)]);
    if (ref[std::size_t(i)] > ref[std::size_t(best)]) best = i;
  }
  EXPECT_EQ(mi::model::greedy_token(logits.data(), vocab), best);
}

TEST(LmHead, GreedyTokenTakesTheFirstMaximum) {
  const float logits[] = {1.0f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(mi::model::greedy_token(logits, 4), 1);
}

// ---- scratch arena --------------------------------------------------------------------------------------------
TEST(ScratchArena, AlignedBumpAllocationWithinThePlan) {
  mi::model::ScratchPlan plan;
  plan.add<float>(10).add<bf16_t>(3).add<float>(100);
  EXPECT_EQ(plan.bytes, 64u + 64u + 448u);
  mi::model::ScratchArena arena(plan.bytes);
  float* a = arena.take<float>(10);
  bf16_t* b = arena.take<bf16_t>(3);
  float* c = arena.take<float>(100);
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c)})
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(arena.used(), plan.bytes);
  EXPECT_THROW(arena.take<float>(1), mi::Error);
  arena.reset();
  EXPECT_EQ(arena.take<float>(10), a);
}
