// The dense forward assembled from the model components (dense_forward.h) against the Hugging Face golden traces
// (tests/data/golden/<case>: trace.json + logits.safetensors; numerical contract in its README.md), at every
// kernel level this CPU supports.
//
// precise mode (f32 activations): the greedy loop (prefill, then one decode step per token) must give exactly
// greedy_ids, every step's logits and p1's teacher-forced prefill logits within 1e-3 absolute of the f32
// reference (the README's contract for an f32 engine).
//
// fast mode (bf16 activations into every matmul): teacher-forced (prefill of the prompt, then decode steps fed
// the reference's greedy_ids), logits compared with a tolerance; top-1 must agree wherever the reference margin
// exceeds that tolerance. See kFastTolerance for the numbers behind it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dense_forward.h"
#include "io/safetensors.h"
#include "kernel_levels.h"

using mi::model::Numerics;

namespace {

const char* const kCases[] = {"qwen3-tiny", "qwen3-hd128", "llama-tiny", "qwen3-tiny-s1"};
constexpr int kMaxContext = 256;  // >= 150 + 32, the longest prompt plus its generated tokens
constexpr int kThreads = 2;
constexpr double kPreciseTolerance = 1e-3;  // README: an f32 engine matches within about 1e-3 absolute

// Fast mode tolerance, from the BF16 rounding analysis and measurement.
// Rounding a matmul input to bf16 is a relative error <= u = 2^-9 (~2e-3) per element. A dense layer rounds
// four inputs (h before q/k/v, the attention output before o_proj, h before gate/up, the SwiGLU product before
// down), plus the final-normed state before the LM head: 13 rounding points in a 3-layer model. At the LM head
// alone, with |logit| up to 14, that is up to ~u * 14 ~ 0.03 per logit; the earlier ones are amplified by the
// random (init std 0.2) layers - HF's own bf16 compute, which rounds every op, is 0.19-1.99 off per prompt on
// these dense cases (README, checks.hf_bf16_compute_teacher_forced). Measured here (identical to within 0.01 at
// scalar/avx2/avx512/avx512bf16), max |logit - ref| over the 32 teacher-forced steps per prompt:
//   qwen3-tiny 0.102 / 0.090 / 0.099, qwen3-hd128 0.097 / 0.107 / 0.112, llama-tiny 0.355 / 0.242 / 0.269,
//   qwen3-tiny-s1 0.131 / 0.101 / 0.088 (p0 / p1 / p2); p1 prefill 0.071-0.145.
// Asserted: every logit within 0.5 (1.4x the worst measured, llama-tiny p0; a bf16 residual stream or a wrongly
// rounded weight would exceed it), every prompt no worse than HF's bf16 compute on the same prompt (measured
// ratio 0.13-0.84), and top-1 equal to the reference wherever the reference margin exceeds the tolerance.
constexpr double kFastTolerance = 0.5;

struct Prompt {
  std::string name;
  std::vector<int> prompt_ids, greedy_ids;
  std::vector<double> margins;
  std::string logits_key, prefill_logits_key;
  double hf_bf16_steps = 0;  // checks.hf_bf16_compute_teacher_forced.max_abs_diff_steps
};

struct GoldenCase {
  std::filesystem::path dir;
  std::vector<Prompt> prompts;
  mi::io::SafetensorsFile logits;
  const mi::io::TensorView& tensor(const std::string& name) const {
    for (const auto& t : logits.tensors())
      if (t.name == name) return t;
    mi::fail(logits.path().string(), ": no tensor ", name);
  }
};

GoldenCase load_case(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(METAINFER_TEST_DATA) / "golden" / name;
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::vector<Prompt> prompts;
  for (const auto& p : trace.at("prompts")) {
    Prompt q;
    q.name = p.at("name");
    q.prompt_ids = p.at("prompt_ids").get<std::vector<int>>();
    q.greedy_ids = p.at("greedy_ids").get<std::vector<int>>();
    q.margins = p.at("margins").get<std::vector<double>>();
    q.logits_key = p.at("logits_key");
    if (!p.at("prefill_logits_key").is_null()) q.prefill_logits_key = p.at("prefill_logits_key");
    q.hf_bf16_steps = p.at("checks").at("hf_bf16_compute_teacher_forced").at("max_abs_diff_steps");
    prompts.push_back(std::move(q));
  }
  return GoldenCase{dir, std::move(prompts), mi::io::SafetensorsFile::open(dir / "logits.safetensors")};
}

double max_abs_diff(const float* a, const float* b, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

template <class K>
class GoldenForward : public ::testing::Test {};
TYPED_TEST_SUITE(GoldenForward, mi_test::KernelLevels, mi_test::KernelLevelName);

TYPED_TEST(GoldenForward, PreciseGreedyIdsAndLogitsMatchReference) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  for (const char* case_name : kCases) {
    SCOPED_TRACE(case_name);
    const GoldenCase golden = load_case(case_name);
    mi_test::DenseModel<K, Numerics::precise> model(golden.dir, kMaxContext, kThreads);
    const int V = model.config().vocab_size;
    std::vector<float> logits(std::size_t(kMaxContext) * V);
    double case_max = 0, prefill_max = 0;

    for (const Prompt& p : golden.prompts) {
      SCOPED_TRACE(p.name);
      const mi::io::TensorView& ref = golden.tensor(p.logits_key);
      const float* ref_rows = ref.as<float>();
      ASSERT_EQ(ref.shape, (std::vector<int64_t>{int64_t(p.greedy_ids.size()), V}));

      model.reset();
      model.forward(p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
      std::vector<int> ids;
      for (std::size_t t = 0; t < p.greedy_ids.size(); ++t) {
        if (t > 0) model.forward(&ids.back(), 1, logits.data(), false);
        const double d = max_abs_diff(logits.data(), ref_rows + t * V, V);
        case_max = std::max(case_max, d);
        EXPECT_LE(d, kPreciseTolerance) << "step " << t;
        ids.push_back(mi::model::greedy_token(logits.data(), V));
      }
      EXPECT_EQ(ids, p.greedy_ids);

      if (!p.prefill_logits_key.empty()) {  // teacher-forced prefill: logits at every prompt position
        const mi::io::TensorView& pre = golden.tensor(p.prefill_logits_key);
        const int T = int(p.prompt_ids.size());
        ASSERT_EQ(pre.shape, (std::vector<int64_t>{T, V}));
        model.reset();
        model.forward(p.prompt_ids.data(), T, logits.data(), true);
        prefill_max = max_abs_diff(logits.data(), pre.as<float>(), T * V);
        EXPECT_LE(prefill_max, kPreciseTolerance);
      }
    }
    std::printf("PRECISE %-10s %-14s max|dlogit| steps %.3g, p1 prefill %.3g\n", K::name, case_name, case_max,
                prefill_max);
  }
}

TYPED_TEST(GoldenForward, FastTeacherForcedLogitsWithinTolerance) {
  using K = TypeParam;
  MI_SKIP_UNSUPPORTED_LEVEL(K);
  for (const char* case_name : kCases) {
    SCOPED_TRACE(case_name);
    const GoldenCase golden = load_case(case_name);
    mi_test::DenseModel<K, Numerics::fast> model(golden.dir, kMaxContext, kThreads);
    const int V = model.config().vocab_size;
    std::vector<float> logits(std::size_t(kMaxContext) * V);
    double case_max = 0, prefill_max = 0;
    int agree = 0, steps = 0, checked = 0, agree_checked = 0;

    for (const Prompt& p : golden.prompts) {
      SCOPED_TRACE(p.name);
      const float* ref_rows = golden.tensor(p.logits_key).as<float>();
      double prompt_max = 0;
      model.reset();
      model.forward(p.prompt_ids.data(), int(p.prompt_ids.size()), logits.data(), false);
      for (std::size_t t = 0; t < p.greedy_ids.size(); ++t) {
        if (t > 0) model.forward(&p.greedy_ids[t - 1], 1, logits.data(), false);  // teacher forcing
        const double d = max_abs_diff(logits.data(), ref_rows + t * V, V);
        case_max = std::max(case_max, d);
        prompt_max = std::max(prompt_max, d);
        EXPECT_LE(d, kFastTolerance) << "step " << t;
        const bool same = mi::model::greedy_token(logits.data(), V) == p.greedy_ids[t];
        agree += same;
        ++steps;
        if (p.margins[t] > kFastTolerance) {
          ++checked;
          agree_checked += same;
          EXPECT_TRUE(same) << "step " << t << " margin " << p.margins[t];
        }
      }
      std::printf("FAST    %-10s %-14s %s max|dlogit| steps %.3g (HF bf16 compute: %.3g)\n", K::name, case_name,
                  p.name.c_str(), prompt_max, p.hf_bf16_steps);
      EXPECT_LE(prompt_max, p.hf_bf16_steps) << "fast mode is less accurate than HF's bf16 compute";
      if (!p.prefill_logits_key.empty()) {
        const int T = int(p.prompt_ids.size());
        model.reset();
        model.forward(p.prompt_ids.data(), T, logits.data(), true);
        prefill_max = max_abs_diff(logits.data(), golden.tensor(p.prefill_logits_key).as<float>(), T * V);
        EXPECT_LE(prefill_max, kFastTolerance);
      }
    }
    std::printf("FAST    %-10s %-14s max|dlogit| steps %.3g, p1 prefill %.3g; top-1 agrees %d/%d steps (%d/%d with "
                "margin > %.2f)\n",
                K::name, case_name, case_max, prefill_max, agree, steps, agree_checked, checked, kFastTolerance);
  }
}

// The result does not depend on the number of threads (deterministic partition).
TEST(GoldenForwardThreads, LogitsIdenticalForOneAndThreeThreads) {
  const GoldenCase golden = load_case("qwen3-hd128");
  const Prompt& p = golden.prompts[2];
  mi_test::DenseModel<mi::kernels::Scalar, Numerics::precise> one(golden.dir, kMaxContext, 1);
  mi_test::DenseModel<mi::kernels::Scalar, Numerics::precise> three(golden.dir, kMaxContext, 3);
  const int V = one.config().vocab_size, T = int(p.prompt_ids.size());
  std::vector<float> a(std::size_t(T) * V), b(a.size());
  one.forward(p.prompt_ids.data(), T, a.data(), true);
  three.forward(p.prompt_ids.data(), T, b.data(), true);
  EXPECT_EQ(a, b);
}

}  // namespace
