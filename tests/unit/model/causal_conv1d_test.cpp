// model/causal_conv1d.h against a plain scalar reference, and the rolling state: a sequence fed at once, token by
// token or in random chunks gives bitwise the same outputs and final state.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/scalar/scalar.h"
#include "model/causal_conv1d.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

using mi::kernels::Scalar;
using mi::model::Conv1dDims;
using mi::runtime::ThreadPool;

namespace {

// Plain reference over a whole sequence from a zero history: y[t, c] = silu(sum_j w[c, j] x[t - (K-1) + j, c]),
// in double. x [T, C] contiguous.
std::vector<double> reference_conv(const std::vector<float>& x, const std::vector<float>& w, int T, int C, int K) {
  std::vector<double> y(std::size_t(T) * C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < K; ++j) {
        const int s = t - (K - 1) + j;
        if (s >= 0) acc += double(w[std::size_t(c) * K + j]) * x[std::size_t(s) * C + c];
      }
      y[std::size_t(t) * C + c] = acc / (1.0 + std::exp(-acc));
    }
  return y;
}

struct ConvRun {
  std::vector<float> y;      // [T, C]
  std::vector<float> state;  // [K-1, C]
};

// Feeds x [T, C] (stored with row stride ldx) in the given chunk sizes from a zero state.
ConvRun run_chunks(ThreadPool& pool, const Conv1dDims& d, const std::vector<float>& x, std::size_t ldx, int T,
                   const std::vector<float>& w, const std::vector<int>& chunks) {
  ConvRun r{std::vector<float>(std::size_t(T) * d.channels, -1.0f),
            std::vector<float>(mi::model::conv1d_state_floats(d), 0.0f)};
  int t0 = 0;
  for (int n : chunks) {
    mi::model::causal_conv1d_silu<Scalar>(pool, d, x.data() + std::size_t(t0) * ldx, ldx, n, w.data(),
                                          r.state.data(), r.y.data() + std::size_t(t0) * d.channels,
                                          std::size_t(d.channels));
    t0 += n;
  }
  EXPECT_EQ(t0, T);
  return r;
}

}  // namespace

TEST(Conv1d, MatchesScalarReference) {
  ThreadPool pool(2);
  for (int K : {1, 2, 4}) {
    const Conv1dDims d{.channels = 24, .kernel = K};
    const int T = 13;
    const auto x = mi_test::random_floats(std::size_t(T) * d.channels, 11);
    const auto w = mi_test::random_floats(std::size_t(d.channels) * K, 12, 0.5f);
    const ConvRun r = run_chunks(pool, d, x, std::size_t(d.channels), T, w, {T});
    const auto ref = reference_conv(x, w, T, d.channels, K);
    for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(r.y[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << i;
    // The state is the last K-1 inputs, oldest first.
    for (int j = 0; j < K - 1; ++j)
      for (int c = 0; c < d.channels; ++c)
        ASSERT_EQ(r.state[std::size_t(j) * d.channels + c], x[std::size_t(T - (K - 1) + j) * d.channels + c]);
  }
}

TEST(Conv1d, AtOnceTokenByTokenAndRandomChunksAreBitwiseEqual) {
  const Conv1dDims d{.channels = 40, .kernel = 4};
  const int T = 37;
  // x is a view with row stride 56 > C, as the conv channels inside a wider projection output would be.
  const std::size_t ldx = 56;
  const auto x = mi_test::random_floats(std::size_t(T) * ldx, 13);
  const auto w = mi_test::random_floats(std::size_t(d.channels) * d.kernel, 14, 0.5f);
  ThreadPool pool1(1), pool3(3);
  const ConvRun whole = run_chunks(pool1, d, x, ldx, T, w, {T});

  std::vector<std::vector<int>> splits;
  splits.push_back(std::vector<int>(T, 1));  // token by token (decode)
  std::mt19937 rng(15);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<int> chunks;
    for (int left = T; left > 0;) {
      const int n = std::min(left, int(rng() % 6));  // 0-token chunks included: they must change nothing
      chunks.push_back(n);
      left -= n;
    }
    splits.push_back(chunks);
  }
  for (const auto& chunks : splits)
    for (ThreadPool* pool : {&pool1, &pool3}) {
      const ConvRun r = run_chunks(*pool, d, x, ldx, T, w, chunks);
      ASSERT_EQ(r.y, whole.y);
      ASSERT_EQ(r.state, whole.state);
    }
}

TEST(Conv1d, DecodeBatchEqualsOneSequenceAtATime) {
  const Conv1dDims d{.channels = 20, .kernel = 4};
  const int B = 3;
  const auto w = mi_test::random_floats(std::size_t(d.channels) * d.kernel, 16, 0.5f);
  ThreadPool pool(2);
  // Give each sequence its own history (prefill of b + 1 tokens), then one batched decode step.
  std::vector<std::vector<float>> states_a(B, std::vector<float>(mi::model::conv1d_state_floats(d), 0.0f));
  for (int b = 0; b < B; ++b) {
    const auto prefix = mi_test::random_floats(std::size_t(b + 1) * d.channels, 17 + b);
    std::vector<float> y(prefix.size());
    mi::model::causal_conv1d_silu<Scalar>(pool, d, prefix.data(), d.channels, b + 1, w.data(), states_a[b].data(),
                                          y.data(), d.channels);
  }
  auto states_b = states_a;
  const auto x = mi_test::random_floats(std::size_t(B) * d.channels, 20);
  std::vector<float> y_batch(x.size()), y_one(x.size());
  std::vector<float*> ptrs;
  for (auto& s : states_a) ptrs.push_back(s.data());
  mi::model::causal_conv1d_silu_decode_batch<Scalar>(pool, d, x.data(), d.channels, B, w.data(), ptrs.data(),
                                                     y_batch.data(), d.channels);
  for (int b = 0; b < B; ++b)
    mi::model::causal_conv1d_silu<Scalar>(pool, d, x.data() + std::size_t(b) * d.channels, d.channels, 1, w.data(),
                                          states_b[b].data(), y_one.data() + std::size_t(b) * d.channels, d.channels);
  EXPECT_EQ(y_batch, y_one);
  EXPECT_EQ(states_a, states_b);
}
