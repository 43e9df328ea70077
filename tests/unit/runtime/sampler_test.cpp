// Sampler (ckb/contracts/sampler.toml) on hand-made logits: greedy exactness and ties, the repetition penalty,
// each filter, seeded reproducibility, the distribution of many temperature draws, parameter errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/sampler.h"

namespace {

using mi::runtime::Sampler;
using mi::runtime::SamplingParams;

SamplingParams sampling(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// Logits whose softmax (at temperature 1) is exactly proportional to `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> l;
  for (const double p : probs) l.push_back(p > 0 ? float(std::log(p)) : -std::numeric_limits<float>::infinity());
  return l;
}

std::vector<int> counts(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> c(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++c[std::size_t(s.sample(logits, {}))];
  return c;
}

TEST(Sampler, GreedyIsExactArgmax) {
  Sampler s(sampling(0), 6);
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, -3, 2.5f, 2.4999f, -1e30f, 0}, {}), 2);
  EXPECT_EQ(s.sample(std::vector<float>{-5, -4, -6, -4.5f, -100, -7}, {}), 1);
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(s.sample(std::vector<float>{ninf, ninf, ninf, ninf, ninf, -1e38f}, {}), 5);
}

TEST(Sampler, GreedyTieGoesToTheLowestId) {
  Sampler s(sampling(0), 5);
  EXPECT_EQ(s.sample(std::vector<float>{1, 3, 2, 3, 3}, {}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{7, 7, 7, 7, 7}, {}), 0);
}

// A vocabulary of many SIMD widths with a ragged tail: the greedy scan keeps running maxima in lanes, so the
// largest value, its ties in other lanes and in the tail, and a bad value anywhere must all be found.
TEST(Sampler, GreedyOverALargeVocabularyFindsTheFirstMaximumAndEveryBadLogit) {
  constexpr int kVocab = 1000 + 7;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[std::size_t(i)] = float((i * 37) % 101) * 0.01f - 1.0f;
  Sampler s(sampling(0), kVocab);
  for (const int at : {0, 15, 16, 517, 998, 1000, 1006}) {
    std::vector<float> l = logits;
    l[std::size_t(at)] = 5.0f;
    EXPECT_EQ(s.sample(l, {}), at);
    if (at + 19 < kVocab) {
      l[std::size_t(at + 19)] = 5.0f;  // a tie in another lane: the lower id wins
      EXPECT_EQ(s.sample(l, {}), at);
    }
    if (at > 3) {
      l[std::size_t(at - 3)] = 5.0f;
      EXPECT_EQ(s.sample(l, {}), at - 3);
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int at = 0; at < kVocab; ++at)  // every lane of the scan and every tail position
    for (const float bad : {nan, inf}) {
      std::vector<float> l = logits;
      l[std::size_t(at)] = bad;
      EXPECT_THROW(s.sample(l, {}), mi::Error) << "logit " << at << " = " << bad;
    }
  EXPECT_THROW(s.sample(std::vector<float>(kVocab, -inf), {}), mi::Error);
  EXPECT_THROW(s.sample(logits, std::vector<int32_t>{4, -1, 7}), mi::Error);
  EXPECT_THROW(s.sample(logits, std::vector<int32_t>{kVocab}), mi::Error);
  std::vector<float> zeros(32, -1.0f);  // -0 and +0 are equal: the lower id wins whichever sign is found first
  zeros[1] = -0.0f;
  zeros[16] = 0.0f;
  EXPECT_EQ(Sampler(sampling(0), 32).sample(zeros, {}), 1);
  std::vector<float> one_finite(kVocab, -inf);
  one_finite[1003] = -1e38f;
  EXPECT_EQ(s.sample(one_finite, {}), 1003);
}

TEST(Sampler, GreedyDoesNotDependOnSeed) {
  const std::vector<float> logits{0.3f, 0.2f, 0.9f, 0.1f};
  for (uint64_t seed : {0ull, 1ull, 12345ull}) {
    Sampler s(sampling(0, seed), 4);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits, {}), 2);
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  SamplingParams p = sampling(0);
  p.repetition_penalty = 2.0f;
  Sampler s(p, 4);
  // id 0: 3.0 seen -> 1.5 < id 1's 2.0, so greedy moves to id 1 (id 0 appears twice: penalised once, 0.75 if twice)
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.0f, 1.0f, 0.0f}, std::vector<int32_t>{0, 0}), 1);
  // 1.6 / 2 = 0.8 stays above 0.7; a double penalty would put it at 0.4 below
  EXPECT_EQ(s.sample(std::vector<float>{1.6f, 0.7f, -1.0f, -2.0f}, std::vector<int32_t>{0, 0, 0}), 0);
  // negative logits are multiplied: -1 * 2 = -2 < -1.5
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.5f, -3.0f, -4.0f}, std::vector<int32_t>{0}), 1);
  // a penalty < 1 rewards seen ids: 1.0 / 0.5 = 2 > 1.5
  p.repetition_penalty = 0.5f;
  Sampler reward(p, 4);
  EXPECT_EQ(reward.sample(std::vector<float>{1.0f, 1.5f, 0.0f, 0.0f}, std::vector<int32_t>{0}), 0);
}

TEST(Sampler, RepetitionPenaltyOneIgnoresHistory) {
  Sampler s(sampling(0), 3);
  EXPECT_EQ(s.sample(std::vector<float>{2, 1, 0}, std::vector<int32_t>{0, 0, 0}), 0);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplingParams p = sampling(5.0f, 99);
  p.top_k = 1;
  Sampler s(p, 5);
  const std::vector<float> logits{0.5f, 0.4f, 0.51f, 0.3f, 0.2f};
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits, {}), 2);
}

TEST(Sampler, TopKKeepsTheKLargestAndBreaksBoundaryTiesTowardsLowIds) {
  SamplingParams p = sampling(1.0f, 5);
  p.top_k = 3;
  Sampler s(p, 6);
  // ids 1, 3 and 4 tie for the third place: id 1 is kept
  const std::vector<int> c = counts(s, std::vector<float>{2.0f, 1.0f, 3.0f, 1.0f, 1.0f, 0.5f}, 3000);
  EXPECT_GT(c[0], 0);
  EXPECT_GT(c[1], 0);
  EXPECT_GT(c[2], 0);
  EXPECT_EQ(c[3] + c[4] + c[5], 0);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const std::vector<float> logits = logits_for({0.5, 0.3, 0.15, 0.05});
  const auto kept = [&](float top_p) {
    SamplingParams p = sampling(1.0f, 11);
    p.top_p = top_p;
    Sampler s(p, 4);
    std::set<int> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(s.sample(logits, {}));
    return seen;
  };
  EXPECT_EQ(kept(0.45f), (std::set<int>{0}));
  EXPECT_EQ(kept(0.75f), (std::set<int>{0, 1}));
  EXPECT_EQ(kept(0.9f), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(kept(1.0f), (std::set<int>{0, 1, 2, 3}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  const std::vector<float> logits = logits_for({0.5, 0.3, 0.15, 0.05});
  const auto kept = [&](float min_p) {
    SamplingParams p = sampling(1.0f, 3);
    p.min_p = min_p;
    Sampler s(p, 4);
    std::set<int> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(s.sample(logits, {}));
    return seen;
  };
  EXPECT_EQ(kept(0.2f), (std::set<int>{0, 1, 2}));  // threshold 0.1
  EXPECT_EQ(kept(0.5f), (std::set<int>{0, 1}));     // threshold 0.25
  EXPECT_EQ(kept(0.9f), (std::set<int>{0}));        // threshold 0.45
}

TEST(Sampler, TopPAndMinPTogetherKeepTheShorterPrefix) {
  const std::vector<float> logits = logits_for({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = sampling(1.0f, 8);
  p.top_p = 0.85f;  // {0, 1, 2}
  p.min_p = 0.6f;   // threshold 0.24: {0, 1}
  Sampler s(p, 4);
  const std::vector<int> c = counts(s, logits, 2000);
  EXPECT_GT(c[0], 0);
  EXPECT_GT(c[1], 0);
  EXPECT_EQ(c[2] + c[3], 0);
}

// Chi-square-free sanity check: each frequency within 5 standard deviations of its expectation.
void expect_frequencies(const std::vector<int>& c, const std::vector<double>& expected, int draws) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double mean = expected[i] * draws, sd = std::sqrt(draws * expected[i] * (1 - expected[i]));
    EXPECT_NEAR(c[i], mean, 5 * sd + 1) << "id " << i;
  }
}

TEST(Sampler, TemperatureOneDrawsTheSoftmaxDistribution) {
  const std::vector<double> probs{0.4, 0.25, 0.2, 0.1, 0.05};
  Sampler s(sampling(1.0f, 2024), 5);
  const int draws = 40000;
  expect_frequencies(counts(s, logits_for(probs), draws), probs, draws);
}

TEST(Sampler, TemperatureFlattensOrSharpensTheDistribution) {
  const std::vector<double> probs{0.6, 0.3, 0.1};
  const int draws = 40000;
  for (const float t : {0.5f, 2.0f}) {
    SCOPED_TRACE(t);
    std::vector<double> expected;
    double z = 0;
    for (const double p : probs) z += std::pow(p, 1.0 / t);
    for (const double p : probs) expected.push_back(std::pow(p, 1.0 / t) / z);
    Sampler s(sampling(t, 77), 3);
    expect_frequencies(counts(s, logits_for(probs), draws), expected, draws);
  }
}

TEST(Sampler, FiltersRenormaliseTheKeptTokens) {
  // top-k 2 of {0.5, 0.3, 0.2}: 0.625 / 0.375
  SamplingParams p = sampling(1.0f, 31);
  p.top_k = 2;
  Sampler s(p, 3);
  const int draws = 40000;
  expect_frequencies(counts(s, logits_for({0.5, 0.3, 0.2}), draws), {0.625, 0.375, 0.0}, draws);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  std::vector<float> logits(64);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  const auto run = [&](uint64_t seed) {
    SamplingParams p = sampling(1.0f, seed);
    p.top_p = 0.95f;
    p.repetition_penalty = 1.1f;
    Sampler s(p, 64);
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.sample(logits, out));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, SplitMix64SeedingMatchesPublishedFirstOutput) {
  // The state is splitmix64(seed) x 4. splitmix64 from 0 starts with 0xe220a8397b1dcdaf (Vigna's reference
  // splitmix64.c); xoshiro256** output 0 is rotl(s1 * 5, 7) * 9 with s1 = the second splitmix64 output.
  const uint64_t s1 = 0x6e789e6aa1b965f4ULL;  // second splitmix64 output from seed 0
  const uint64_t x = s1 * 5;
  const uint64_t expected = ((x << 7) | (x >> 57)) * 9;
  mi::runtime::Xoshiro256StarStar rng(0);
  EXPECT_EQ(rng.next(), expected);
  const double u = rng.uniform();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(Sampler, TinyTemperatureBehavesLikeGreedy) {
  Sampler s(sampling(1e-30f, 4), 4);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(std::vector<float>{0.1f, 0.3f, 0.2f, -1}, {}), 1);
}

void expect_param_error(const SamplingParams& p, const std::string& name) {
  try {
    mi::runtime::validate(p);
    ADD_FAILURE() << "no error for " << name;
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  EXPECT_THROW(Sampler(p, 4), mi::Error);
}

TEST(Sampler, ParameterErrorsNameTheParameter) {
  SamplingParams p;
  p.temperature = -0.1f;
  expect_param_error(p, "temperature");
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  expect_param_error(p, "temperature");
  p = {};
  p.top_k = -1;
  expect_param_error(p, "top_k");
  p = {};
  p.top_p = 0.0f;
  expect_param_error(p, "top_p");
  p.top_p = 1.01f;
  expect_param_error(p, "top_p");
  p = {};
  p.min_p = 1.0f;
  expect_param_error(p, "min_p");
  p.min_p = -0.01f;
  expect_param_error(p, "min_p");
  p = {};
  p.repetition_penalty = 0.0f;
  expect_param_error(p, "repetition_penalty");
  p.repetition_penalty = std::numeric_limits<float>::infinity();
  expect_param_error(p, "repetition_penalty");
  EXPECT_NO_THROW(mi::runtime::validate(SamplingParams{}));
}

TEST(Sampler, BadInputsAreErrors) {
  Sampler greedy(sampling(0), 3);
  Sampler hot(sampling(1), 3);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (Sampler* s : {&greedy, &hot}) {
    EXPECT_THROW(s->sample(std::vector<float>{1, 2}, {}), mi::Error);  // wrong size
    EXPECT_THROW(s->sample(std::vector<float>{1, nan, 2}, {}), mi::Error);
    EXPECT_THROW(s->sample(std::vector<float>{1, inf, 2}, {}), mi::Error);
    EXPECT_THROW(s->sample(std::vector<float>{-inf, -inf, -inf}, {}), mi::Error);
    EXPECT_THROW(s->sample(std::vector<float>{1, 2, 3}, std::vector<int32_t>{3}), mi::Error);
    EXPECT_THROW(s->sample(std::vector<float>{1, 2, 3}, std::vector<int32_t>{-1}), mi::Error);
  }
  EXPECT_THROW(Sampler(SamplingParams{}, 0), mi::Error);
}

}  // namespace
