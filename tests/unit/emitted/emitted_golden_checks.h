// The real emitted model (`metainfer emit`, run by CMake for each golden case at the avx2 level into
// build/emitted/<case>/) against the Hugging Face golden traces (tests/data/golden/<case>: trace.json +
// logits.safetensors; numerical contract in its README.md). The emitted model.h is the project's only forward
// assembly: these tests and every generated engine run the same text. Other kernel levels are verified through
// whole engines (tests/unit/toolkit_gates).
//
// precise (f32 activations): the greedy loop (prefill, then one decode step per token) gives exactly greedy_ids,
// every step's logits and p1's teacher-forced prefill within 1e-3 absolute of the f32 reference.
// fast (bf16 activations, where the engine offers it): teacher-forced logits within 0.5 of the reference and no
// worse than HF's own bf16 compute on the same prompt; top-1 equal wherever the reference margin exceeds 0.5 (the
// numbers behind 0.5: tests/data/golden/README.md and ckb/contracts/kernels.toml).
// Also: chunked prefill equals one prefill; a decode step allocates nothing; a freed and reused sequence starts clean.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "io/safetensors.h"
#include "runtime/kv_cache.h"

// Allocations so far in this test executable (allocation_count.cpp replaces operator new with a counting one).
long allocation_count();

namespace emitted_test {

constexpr int kMaxContext = 256;  // >= 150 + 32, the longest golden prompt plus its generated tokens
constexpr double kPreciseTolerance = 1e-3;
constexpr double kFastTolerance = 0.5;

struct Prompt {
  std::string name;
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<double> margins;
  std::string logits_key, prefill_logits_key;
  double hf_bf16_steps = 0;  // checks.hf_bf16_compute_teacher_forced.max_abs_diff_steps
};

struct GoldenCase {
  std::filesystem::path dir;
  std::vector<Prompt> prompts;
  mi::io::SafetensorsFile logits;
  const float* rows(const std::string& key) const {
    for (const auto& t : logits.tensors())
      if (t.name == key) return t.as<float>();
    ADD_FAILURE() << "no tensor " << key;
    return nullptr;
  }
};

inline GoldenCase load_case(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(METAINFER_TEST_DATA) / "golden" / name;
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::vector<Prompt> prompts;
  for (const auto& p : trace.at("prompts")) {
    Prompt q;
    q.name = p.at("name");
    q.prompt_ids = p.at("prompt_ids").get<std::vector<int32_t>>();
    q.greedy_ids = p.at("greedy_ids").get<std::vector<int32_t>>();
    q.margins = p.at("margins").get<std::vector<double>>();
    q.logits_key = p.at("logits_key");
    if (!p.at("prefill_logits_key").is_null()) q.prefill_logits_key = p.at("prefill_logits_key");
    q.hf_bf16_steps = p.at("checks").at("hf_bf16_compute_teacher_forced").at("max_abs_diff_steps");
    prompts.push_back(std::move(q));
  }
  return GoldenCase{dir, std::move(prompts), mi::io::SafetensorsFile::open(dir / "logits.safetensors")};
}

inline double max_abs_diff(const float* a, const float* b, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

inline int32_t argmax(const float* x, int n) { return int32_t(std::max_element(x, x + n) - x); }

inline mi::engine::RuntimeOptions options(bool fast, int max_batch = 1) {
  mi::engine::RuntimeOptions o;
  o.threads = 2;
  o.max_batch = max_batch;
  o.max_context = kMaxContext;
  o.fast = fast;
  return o;
}

template <class Model>
void precise_greedy_ids_and_logits(const std::string& case_name) {
  const GoldenCase golden = load_case(case_name);
  Model model(golden.dir, options(false));
  const int V = model.vocab_size();
  std::vector<float> logits(std::size_t(kMaxContext) * std::size_t(V));
  for (const Prompt& p : golden.prompts) {
    SCOPED_TRACE(p.name);
    const float* ref = golden.rows(p.logits_key);
    ASSERT_NE(ref, nullptr);
    const int seq = model.new_sequence();
    model.forward(seq, p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
    std::vector<int32_t> ids;
    double worst = 0;
    for (std::size_t t = 0; t < p.greedy_ids.size(); ++t) {
      if (t > 0) model.forward(seq, &ids.back(), 1, logits.data(), false);
      const double d = max_abs_diff(logits.data(), ref + t * std::size_t(V), std::size_t(V));
      worst = std::max(worst, d);
      EXPECT_LE(d, kPreciseTolerance) << "step " << t;
      ids.push_back(argmax(logits.data(), V));
    }
    EXPECT_EQ(ids, p.greedy_ids);
    model.free_sequence(seq);
    if (!p.prefill_logits_key.empty()) {  // teacher-forced prefill: logits at every prompt position
      const int T = int(p.prompt_ids.size());
      const int s = model.new_sequence();
      model.forward(s, p.prompt_ids.data(), T, logits.data(), true);
      EXPECT_LE(max_abs_diff(logits.data(), golden.rows(p.prefill_logits_key), std::size_t(T) * V), kPreciseTolerance);
      model.free_sequence(s);
    }
    std::printf("PRECISE %-16s %s max|dlogit| %.3g\n", case_name.c_str(), p.name.c_str(), worst);
  }
}

template <class Model>
void fast_teacher_forced_logits(const std::string& case_name, bool offered) {
  const GoldenCase golden = load_case(case_name);
  Model model(golden.dir, options(true));
  const int V = model.vocab_size();
  std::vector<float> logits(std::size_t(kMaxContext) * std::size_t(V));
  if (!offered) {  // withheld (e.g. HYBRID-005): the model refuses, it does not run unjudged
    const int seq = model.new_sequence();
    EXPECT_THROW(model.forward(seq, golden.prompts[0].prompt_ids.data(), 1, logits.data(), false), mi::Error);
    return;
  }
  for (const Prompt& p : golden.prompts) {
    SCOPED_TRACE(p.name);
    const float* ref = golden.rows(p.logits_key);
    ASSERT_NE(ref, nullptr);
    const int seq = model.new_sequence();
    model.forward(seq, p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
    double worst = 0;
    for (std::size_t t = 0; t < p.greedy_ids.size(); ++t) {
      if (t > 0) model.forward(seq, &p.greedy_ids[t - 1], 1, logits.data(), false);  // teacher forcing
      const double d = max_abs_diff(logits.data(), ref + t * std::size_t(V), std::size_t(V));
      worst = std::max(worst, d);
      EXPECT_LE(d, kFastTolerance) << "step " << t;
      if (p.margins[t] > kFastTolerance) {
        EXPECT_EQ(argmax(logits.data(), V), p.greedy_ids[t]) << "step " << t;
      }
    }
    EXPECT_LE(worst, p.hf_bf16_steps) << "fast numerics is less accurate than HF's bf16 compute";
    model.free_sequence(seq);
    std::printf("FAST    %-16s %s max|dlogit| %.3g (HF bf16 compute %.3g)\n", case_name.c_str(), p.name.c_str(), worst,
                p.hf_bf16_steps);
  }
}

// The KV cache holds what the constraints asked for: bf16 keys and values in fast numerics when runtime.kv_dtype =
// "bf16" (half the bytes), f32 otherwise and always in precise numerics; rows written by a forward step read back as
// that type only.
template <class Model>
void kv_cache_dtype_follows_the_constraints(const std::string& case_name, bool bf16_in_fast) {
  const GoldenCase golden = load_case(case_name);
  Model fast(golden.dir, options(true)), precise(golden.dir, options(false));
  const mi::runtime::KvDtype expected = bf16_in_fast ? mi::runtime::KvDtype::bf16 : mi::runtime::KvDtype::f32;
  EXPECT_EQ(fast.kv_cache().dtype(), expected);
  EXPECT_EQ(precise.kv_cache().dtype(), mi::runtime::KvDtype::f32);
  EXPECT_EQ(fast.kv_cache().bytes() * (bf16_in_fast ? 2 : 1), precise.kv_cache().bytes());
  const Prompt& p = golden.prompts.front();
  std::vector<float> logits(static_cast<std::size_t>(fast.vocab_size()));
  const int seq = fast.new_sequence();
  fast.forward(seq, p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
  if (bf16_in_fast) {
    EXPECT_NE(fast.kv_cache().template key<mi::bf16_t>(seq, 0, 0, 0), nullptr);
    EXPECT_THROW(fast.kv_cache().key(seq, 0, 0, 0), mi::Error);
  } else {
    EXPECT_NE(fast.kv_cache().key(seq, 0, 0, 0), nullptr);
  }
}

// Prefill in chunks of 4 (and token by token) gives the logits of one prefill, and a sequence slot that is freed
// and reused starts from a clean cache and clean recurrent state.
template <class Model>
void chunked_prefill_and_reuse(const std::string& case_name) {
  const GoldenCase golden = load_case(case_name);
  Model model(golden.dir, options(false));
  const int V = model.vocab_size();
  const Prompt& p = golden.prompts.back();
  const int T = int(p.prompt_ids.size());
  std::vector<float> whole(static_cast<std::size_t>(V)), part(static_cast<std::size_t>(V));
  const int a = model.new_sequence();
  model.forward(a, p.prompt_ids.data(), T, whole.data(), false);
  model.free_sequence(a);
  for (int chunk : {4, 1}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const int b = model.new_sequence();  // reuses the freed slot
    for (int t = 0; t < T; t += chunk) model.forward(b, p.prompt_ids.data() + t, std::min(chunk, T - t), part.data(), false);
    EXPECT_LE(max_abs_diff(whole.data(), part.data(), std::size_t(V)), 1e-4);
    EXPECT_EQ(argmax(whole.data(), V), argmax(part.data(), V));
    model.free_sequence(b);
  }
}

// After warm-up, a decode step (one sequence, and a batched step of two) allocates nothing.
// A batched decode step (forward_batch: one token of each of B live sequences, the path the server runs) gives each
// sequence the logits it gets decoding alone: the golden prompts (up to 3) prefilled, then 8 steps fed their trace's
// greedy ids, batched in one model and one at a time in another. The kernels accumulate every batch row as the lone
// matrix-vector product does, so this is exact in practice; 1e-5 leaves room only for summation order.
template <class Model>
void batched_decode_equals_decoding_alone(const std::string& case_name, bool fast = false) {
  const GoldenCase golden = load_case(case_name);
  const int B = int(std::min<std::size_t>(3, golden.prompts.size()));
  Model batched(golden.dir, options(fast, B)), alone(golden.dir, options(fast, B));
  const int V = batched.vocab_size();
  std::vector<float> logits(std::size_t(kMaxContext) * std::size_t(V)), one(static_cast<std::size_t>(V));
  std::vector<int> seq_b(B), seq_a(B);
  for (int b = 0; b < B; ++b) {
    const Prompt& p = golden.prompts[std::size_t(b)];
    seq_b[b] = batched.new_sequence();
    seq_a[b] = alone.new_sequence();
    batched.forward(seq_b[b], p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
    alone.forward(seq_a[b], p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
  }
  double worst = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> ids(B);
    for (int b = 0; b < B; ++b) ids[b] = golden.prompts[std::size_t(b)].greedy_ids[std::size_t(step)];
    batched.forward_batch(seq_b.data(), ids.data(), B, logits.data());
    for (int b = 0; b < B; ++b) {
      alone.forward(seq_a[b], &ids[b], 1, one.data(), false);
      const float* row = logits.data() + std::size_t(b) * std::size_t(V);
      worst = std::max(worst, max_abs_diff(row, one.data(), std::size_t(V)));
      EXPECT_EQ(argmax(row, V), argmax(one.data(), V)) << "sequence " << b << " step " << step;
    }
  }
  EXPECT_LE(worst, 1e-5);
  std::printf("BATCHED %-16s B=%d max|dlogit| vs alone %.3g\n", case_name.c_str(), B, worst);
}

template <class Model>
void decode_allocates_nothing(const std::string& case_name) {
  const GoldenCase golden = load_case(case_name);
  Model model(golden.dir, options(false, 2));
  const int V = model.vocab_size();
  const Prompt& p = golden.prompts.back();
  std::vector<float> logits(2 * std::size_t(V));
  const int a = model.new_sequence(), b = model.new_sequence();
  model.forward(a, p.prompt_ids.data(), 8, logits.data(), false);
  model.forward(b, p.prompt_ids.data(), 5, logits.data(), false);
  const int seqs[2] = {a, b};
  const int32_t ids[2] = {p.prompt_ids[8], p.prompt_ids[5]};
  model.forward(a, &ids[0], 1, logits.data(), false);  // warm-up
  const long before = ::allocation_count();
  model.forward(a, &ids[1], 1, logits.data(), false);
  model.forward_batch(seqs, ids, 2, logits.data());
  EXPECT_EQ(::allocation_count() - before, 0);
}

}  // namespace emitted_test
