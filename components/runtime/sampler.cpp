#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace mi::runtime {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    fail("sampling parameter temperature: expected a finite number >= 0 (0 = greedy), got ", p.temperature);
  if (p.top_k < 0) fail("sampling parameter top_k: expected an integer >= 0 (0 = off), got ", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    fail("sampling parameter top_p: expected a number in (0, 1] (1 = off), got ", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p < 1.0f))
    fail("sampling parameter min_p: expected a number in [0, 1) (0 = off), got ", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    fail("sampling parameter repetition_penalty: expected a finite number > 0 (1 = off), got ",
         p.repetition_penalty);
}

// ---- xoshiro256** ----------------------------------------------------------------------------------------------

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Xoshiro256StarStar::Xoshiro256StarStar(uint64_t seed) {
  // splitmix64 never yields four zero words in a row, so the state is never the forbidden all-zero state.
  for (uint64_t& word : s_) word = splitmix64(seed);
}

uint64_t Xoshiro256StarStar::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Xoshiro256StarStar::uniform() { return double(next() >> 11) * 0x1.0p-53; }

// ---- Sampler ---------------------------------------------------------------------------------------------------

Sampler::Sampler(const SamplingParams& params, int vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed) {
  validate(params);
  if (vocab_size <= 0) fail("sampler: vocab_size must be positive, got ", vocab_size);
  work_.resize(std::size_t(vocab_size));
  candidates_.resize(std::size_t(vocab_size));
  seen_.assign(std::size_t(vocab_size), 0);
}

namespace {
// Greedy choice straight from the logits (no penalty to apply): one pass for the largest value that also notes
// whether any logit is NaN or +inf (both fail `x < +inf`), kept in kLanes independent running maxima (independent
// chains; clang turns them into vector max, GCC 12 keeps them scalar), then the first id holding that value (the
// lowest id on ties; == treats -0 and +0 alike, as the checking path's argmax does). -1 when a logit is bad, so that
// the caller's checking path names it. A served batch samples every sequence on the loop thread between decode
// passes: the copying loop took ~0.3 ms per 151936-entry row (2.4 ms of a batch-8 step, issue 10), this one 0.06-0.11.
int32_t greedy_from_logits(std::span<const float> logits) {
  constexpr std::size_t kLanes = 16;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::size_t n = logits.size();
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, -kInf);
  int bad = 0;
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const float x = logits[i + j];
      bad |= int(!(x < kInf));
      lane_max[j] = x > lane_max[j] ? x : lane_max[j];
    }
  for (; i < n; ++i) {
    const float x = logits[i];
    bad |= int(!(x < kInf));
    lane_max[0] = x > lane_max[0] ? x : lane_max[0];
  }
  if (bad) return -1;
  const float best = *std::max_element(lane_max, lane_max + kLanes);
  return int32_t(std::find(logits.begin(), logits.end(), best) - logits.begin());
}
}  // namespace

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (params_.temperature == 0.0f && params_.repetition_penalty == 1.0f && logits.size() == std::size_t(vocab_size_)) {
    bool history_ok = true;
    for (const int32_t id : history) history_ok &= id >= 0 && id < vocab_size_;
    const int32_t token = history_ok ? greedy_from_logits(logits) : -1;
    if (token >= 0 && logits[std::size_t(token)] != -std::numeric_limits<float>::infinity()) return token;
    // A bad logit or history id, or every logit -inf: the checking path below fails with the message naming it.
  }
  load_penalized(logits, history);
  if (params_.temperature == 0.0f) return argmax();
  return draw();
}

void Sampler::load_penalized(std::span<const float> logits, std::span<const int32_t> history) {
  if (logits.size() != std::size_t(vocab_size_))
    fail("sampler: logits row has ", logits.size(), " entries, expected vocab_size ", vocab_size_);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      fail("sampler: logit of id ", i, " is ", x, "; expected a finite number or -inf");
    work_[i] = x;
  }
  for (const int32_t id : history)
    if (id < 0 || id >= vocab_size_) fail("sampler: history id ", id, " outside the vocabulary [0, ", vocab_size_, ")");
  const float penalty = params_.repetition_penalty;
  if (penalty == 1.0f) return;
  // Each distinct id is penalised once however often it occurs; the stamp marks ids done in this call.
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  for (const int32_t id : history) {
    if (seen_[std::size_t(id)] == stamp_) continue;
    seen_[std::size_t(id)] = stamp_;
    float& x = work_[std::size_t(id)];
    x = x > 0.0f ? x / penalty : x * penalty;
  }
}

int32_t Sampler::argmax() const {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab_size_; ++i)
    if (work_[std::size_t(i)] > work_[std::size_t(best)]) best = i;  // strict: the lowest id keeps a tie
  if (work_[std::size_t(best)] == -std::numeric_limits<float>::infinity())
    fail("sampler: every logit is -inf; no token can be chosen");
  return best;
}

int32_t Sampler::draw() {
  float* const w = work_.data();
  int32_t* const c = candidates_.data();
  const float temperature = params_.temperature;
  for (int i = 0; i < vocab_size_; ++i) w[i] /= temperature;
  std::iota(c, c + vocab_size_, 0);
  std::size_t n = std::size_t(vocab_size_);
  bool id_ordered = true;

  // Descending value, then ascending id: a total order, so every filter is deterministic under ties.
  const auto higher = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };

  if (params_.top_k > 0 && std::size_t(params_.top_k) < n) {
    std::nth_element(c, c + params_.top_k, c + n, higher);
    n = std::size_t(params_.top_k);
    id_ordered = false;
  }

  float max_logit = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) max_logit = std::max(max_logit, w[c[i]]);
  if (max_logit == -std::numeric_limits<float>::infinity())
    fail("sampler: every logit is -inf; no token can be chosen");

  // Softmax numerators with the largest one equal to 1 (a logit equal to the maximum gives exactly 1, also when
  // a tiny temperature scaled it to +inf); the normaliser is kept in double.
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = w[c[i]];
    const float e = x == max_logit ? 1.0f : std::exp(x - max_logit);
    w[c[i]] = e;
    total += e;
  }

  // min-p before top-p gives the same set as the contract's order (top-p, then min-p): both keep a prefix of the
  // tokens sorted by probability, so the result is the shorter prefix. Filtering first leaves less to sort.
  // The threshold is min_p * largest probability = min_p * 1 / total, i.e. numerator >= min_p.
  if (params_.min_p > 0.0f) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (w[c[i]] >= params_.min_p) c[kept++] = c[i];
    n = kept;  // never empty: the largest numerator is 1 > min_p
  }

  if (params_.top_p < 1.0f) {
    std::sort(c, c + n, higher);
    const double target = double(params_.top_p) * total;  // mass measured against the whole (top-k) distribution
    double mass = 0.0;
    std::size_t kept = 0;
    while (kept < n) {
      mass += w[c[kept++]];
      if (mass >= target) break;
    }
    n = kept;
    id_ordered = false;
  }

  if (!id_ordered) std::sort(c, c + n);
  double kept_mass = 0.0;
  for (std::size_t i = 0; i < n; ++i) kept_mass += w[c[i]];
  const double u = rng_.uniform() * kept_mass;
  double running = 0.0;
  int32_t last_possible = c[0];
  for (std::size_t i = 0; i < n; ++i) {
    const float p = w[c[i]];
    if (p <= 0.0f) continue;
    running += p;
    last_possible = c[i];
    if (running > u) return c[i];
  }
  return last_possible;  // rounding left u at the very top of the range
}

}  // namespace mi::runtime
