// The per-head attention kernels against the Scalar level: scores (one dot product per key, scaled) within the
// summation bound of a d-term dot product, values (a weighted sum of n rows added to out) within the summation
// bound of an (n + 1)-term sum per output. Key/value rows have a stride larger than d (as a paged cache's rows
// could), head dims cover the tails of every vector width, and nothing past s[n - 1] / out[d - 1] is written.
#include <algorithm>

#include "kernel_test_support.h"

namespace mi::kernels::test {
namespace {

template <class K>
class AttentionKernelsTest : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionKernelsTest, Levels);

const int kKeys[] = {1, 3, 15, 16, 17, 40, 129};
const int kHeadDims[] = {1, 7, 16, 64, 80, 128, 136, 256};

TYPED_TEST(AttentionKernelsTest, ScoresWithinSummationBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 1;
  for (int n : kKeys)
    for (int d : kHeadDims) {
      const std::size_t ldk = std::size_t(d) + 3;
      const auto q = random_floats(std::size_t(d), -1.0f, 1.0f, seed++);
      const auto k = random_floats(std::size_t(n) * ldk, -1.0f, 1.0f, seed++);
      const float scale = 0.125f;
      std::vector<float> s(std::size_t(n) + 1, 42.0f);
      std::vector<float> ref(static_cast<std::size_t>(n));
      K::attention_scores(q.data(), k.data(), ldk, n, d, scale, s.data());
      Scalar::attention_scores(q.data(), k.data(), ldk, n, d, scale, ref.data());
      for (int j = 0; j < n; ++j) {
        double sum_abs = 0;
        for (int i = 0; i < d; ++i) sum_abs += std::fabs(double(q[std::size_t(i)]) * k[std::size_t(j) * ldk + std::size_t(i)]);
        ASSERT_NEAR(s[std::size_t(j)], ref[std::size_t(j)], dot_bound(d, sum_abs) * scale + 2 * kU * std::fabs(ref[std::size_t(j)]))
            << K::name << " n=" << n << " d=" << d << " j=" << j;
      }
      ASSERT_EQ(s[std::size_t(n)], 42.0f) << "wrote past s[n - 1]";
    }
}

TYPED_TEST(AttentionKernelsTest, ValuesWithinSummationBound) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 100;
  for (int n : kKeys)
    for (int d : kHeadDims) {
      const std::size_t ldv = std::size_t(d) + 5;
      const auto p = random_floats(std::size_t(n), 0.0f, 1.0f, seed++);
      const auto v = random_floats(std::size_t(n) * ldv, -1.0f, 1.0f, seed++);
      const auto out0 = random_floats(std::size_t(d) + 1, -1.0f, 1.0f, seed++);
      std::vector<float> out = out0, ref = out0;
      K::attention_values(p.data(), v.data(), ldv, n, d, out.data());
      Scalar::attention_values(p.data(), v.data(), ldv, n, d, ref.data());
      for (int i = 0; i < d; ++i) {
        double sum_abs = std::fabs(out0[std::size_t(i)]);
        for (int j = 0; j < n; ++j) sum_abs += std::fabs(double(p[std::size_t(j)]) * v[std::size_t(j) * ldv + std::size_t(i)]);
        ASSERT_NEAR(out[std::size_t(i)], ref[std::size_t(i)], dot_bound(n + 1, sum_abs)) << K::name << " n=" << n << " d=" << d << " i=" << i;
      }
      ASSERT_EQ(out[std::size_t(d)], out0[std::size_t(d)]) << "wrote past out[d - 1]";
    }
}

// bf16 keys and values (fast numerics' KV cache): each level's bf16 overloads give exactly what its f32 kernels give
// for the rows widened to f32 (ckb/contracts/kernels.toml), for every key count and head dim above (tails of every
// vector width, rows that do not start on a cache line), and write nothing past s[n - 1] / out[d - 1].
TYPED_TEST(AttentionKernelsTest, Bf16RowsGiveTheF32ResultOfTheWidenedRows) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 300;
  auto widened = [](const std::vector<bf16_t>& b) {
    std::vector<float> x(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) x[i] = bf16_to_f32(b[i]);
    return x;
  };
  for (int n : kKeys)
    for (int d : kHeadDims) {
      const std::size_t ld = std::size_t(d) + 3;
      const auto q = random_floats(std::size_t(d), -1.0f, 1.0f, seed++);
      const auto kb = to_bf16_vector(random_floats(std::size_t(n) * ld, -1.0f, 1.0f, seed++));
      const auto vb = to_bf16_vector(random_floats(std::size_t(n) * ld, -1.0f, 1.0f, seed++));
      const auto kw = widened(kb), vw = widened(vb);
      std::vector<float> s(std::size_t(n) + 1, 42.0f), s_ref(std::size_t(n) + 1, 42.0f);
      K::attention_scores(q.data(), kb.data(), ld, n, d, 0.125f, s.data());
      K::attention_scores(q.data(), kw.data(), ld, n, d, 0.125f, s_ref.data());
      ASSERT_EQ(0, std::memcmp(s.data(), s_ref.data(), sizeof(float) * s.size())) << K::name << " scores n=" << n << " d=" << d;
      const auto p = random_floats(std::size_t(n), 0.0f, 1.0f, seed++);
      const auto out0 = random_floats(std::size_t(d) + 1, -1.0f, 1.0f, seed++);
      std::vector<float> out = out0, out_ref = out0;
      K::attention_values(p.data(), vb.data(), ld, n, d, out.data());
      K::attention_values(p.data(), vw.data(), ld, n, d, out_ref.data());
      ASSERT_EQ(0, std::memcmp(out.data(), out_ref.data(), sizeof(float) * out.size())) << K::name << " values n=" << n << " d=" << d;
    }
}

// The query-block forms (a prefill's block over one span of the cache) give each query exactly what the one-query
// kernels give it, for f32 and bf16 rows, every key count and head dim (full 16-key groups and tails; head dims that
// take the AVX-512 lanes layout, up to its 512 limit, and those that keep rows: 1, 7, 136, 528), query counts that
// are and are not multiples of 4, and write nothing past s[i][count - 1] / out[i][d - 1]. scores_prepared gets every
// query's own key count: all n, none, a tail inside the last 16-key group, a count ending on a group boundary, a
// single key (a prefill's diagonal span), and in a second pass counts all below n with the keys cut to the longest,
// so a read past it leaves the vector (seen by an ASan build, e.g. METAINFER_FUZZ's). Bitwise, so a prefill and the
// same positions decoded one at a time agree exactly.
template <class K, class E>
void check_multi_equals_single(const std::vector<E>& keys, const std::vector<E>& values, std::size_t ld, int n, int d,
                               uint32_t& seed) {
  for (bool all_below_n : {false, true})
    for (int nq : {1, 3, 4, 5, 8, 11, 16}) {
      std::vector<std::vector<float>> q, s(nq), s_ref(nq), p, out(nq), out_ref(nq);
      std::vector<const float*> qp, pp;
      std::vector<float*> sp, op;
      std::vector<int> count(std::size_t(nq), 0);
      const int with_n[] = {n, 0, n - 1, n / 16 * 16, 1, n / 2, (n + 1) / 2 + 3};
      const int below_n[] = {n - 1, n / 2, 1, 0, (n - 1) / 16 * 16};
      int longest = 0;
      for (int i = 0; i < nq; ++i) {
        q.push_back(random_floats(std::size_t(d), -1.0f, 1.0f, seed++));
        p.push_back(random_floats(std::size_t(n), 0.0f, 1.0f, seed++));
        count[std::size_t(i)] = all_below_n ? std::clamp(below_n[i % 5], 0, n - 1) : std::clamp(with_n[i % 7], 0, n);
        longest = std::max(longest, count[std::size_t(i)]);
        s[i].assign(std::size_t(n) + 1, 42.0f);
        s_ref[i].assign(std::size_t(n) + 1, 42.0f);
        out[i] = random_floats(std::size_t(d) + 1, -1.0f, 1.0f, seed++);
        out_ref[i] = out[i];
      }
      const std::vector<E> used_keys(keys.begin(), keys.begin() + std::ptrdiff_t(std::size_t(longest) * ld));
      for (int i = 0; i < nq; ++i) {
        qp.push_back(q[i].data());
        pp.push_back(p[i].data());
        sp.push_back(s[i].data());
        op.push_back(out[i].data());
        if (count[std::size_t(i)] > 0)
          K::attention_scores(q[i].data(), used_keys.data(), ld, count[std::size_t(i)], d, 0.125f, s_ref[i].data());
        K::attention_values(p[i].data(), values.data(), ld, n, d, out_ref[i].data());
      }
      std::vector<float> prepared(std::size_t(kAttentionPreparedMaxQueries) * std::size_t(d), -7.0f);
      K::attention_prepare_queries(qp.data(), nq, d, prepared.data());
      K::attention_scores_prepared(prepared.data(), nq, used_keys.data(), ld, count.data(), d, 0.125f, sp.data());
      K::attention_values_multi(pp.data(), nq, values.data(), ld, n, d, op.data());
      for (int i = 0; i < nq; ++i) {
        ASSERT_EQ(0, std::memcmp(s[i].data(), s_ref[i].data(), sizeof(float) * s[i].size()))
            << K::name << " scores nq=" << nq << " query " << i << " keys " << count[std::size_t(i)] << " of n=" << n
            << " d=" << d;
        ASSERT_EQ(0, std::memcmp(out[i].data(), out_ref[i].data(), sizeof(float) * out[i].size()))
            << K::name << " values nq=" << nq << " query " << i << " n=" << n << " d=" << d;
      }
    }
}

TYPED_TEST(AttentionKernelsTest, MultiQueryFormsEqualOneQueryBitwise) {
  using K = TypeParam;
  MI_SKIP_IF_UNSUPPORTED(K);
  uint32_t seed = 500;
  std::vector<int> head_dims(std::begin(kHeadDims), std::end(kHeadDims));
  head_dims.insert(head_dims.end(), {kAttentionPreparedMaxHeadDim, kAttentionPreparedMaxHeadDim + 16});
  for (int n : kKeys)
    for (int d : head_dims) {
      const std::size_t ld = std::size_t(d) + 3;
      const auto k = random_floats(std::size_t(n) * ld, -1.0f, 1.0f, seed++);
      const auto v = random_floats(std::size_t(n) * ld, -1.0f, 1.0f, seed++);
      check_multi_equals_single<K>(k, v, ld, n, d, seed);
      check_multi_equals_single<K>(to_bf16_vector(k), to_bf16_vector(v), ld, n, d, seed);
    }
}

}  // namespace
}  // namespace mi::kernels::test
