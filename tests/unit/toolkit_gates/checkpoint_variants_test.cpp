// The authenticity check's perturbed copy (toolkit/gates/checkpoint_variants.cpp): one two-dimensional tensor, chosen
// by the seed, negated or scaled by a factor in [0.5, 0.8] - never scaled up (a larger q_proj sharpens the attention
// past the fast-numerics bound calibrated on the real weights) - and every other tensor copied unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "../toolkit_support.h"
#include "common/bf16.h"
#include "gates/checkpoint_variants.h"
#include "io/safetensors.h"

namespace {
namespace fs = std::filesystem;

double value(const mi::io::TensorView& t, std::size_t i) {
  return t.dtype == mi::io::DType::BF16 ? mi::bf16_to_f32(t.as<mi::bf16_t>()[i]) : t.as<float>()[i];
}

TEST(CheckpointVariants, PerturbationsFlipOrShrinkOneTensorAndNeverScaleUp) {
  const fs::path from = mi_test::golden("qwen3-tiny");
  mi_test::TempDir dir("perturb");
  const mi::io::WeightStore original = mi::io::WeightStore::open(from);
  std::set<std::string> kinds, tensors;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const fs::path to = dir / ("p" + std::to_string(seed));
    const mi::gates::Perturbation p = mi::gates::write_perturbed_checkpoint(from, to, seed);
    double factor = -1.0;
    if (p.how != "sign flip") {
      ASSERT_EQ(p.how.rfind("scaled by ", 0), 0u) << p.how;
      factor = std::stod(p.how.substr(10));
      EXPECT_GE(factor, 0.5) << p.how;
      EXPECT_LE(factor, 0.8) << p.how;
    }
    kinds.insert(factor < 0 ? "flip" : "scale");
    tensors.insert(p.tensor);
    const mi::io::WeightStore perturbed = mi::io::WeightStore::open(to);
    ASSERT_EQ(perturbed.names(), original.names());
    for (const std::string& name : original.names()) {
      const mi::io::TensorView& a = original.get(name);
      const mi::io::TensorView& b = perturbed.get(name);
      ASSERT_EQ(a.shape, b.shape) << name;
      if (name != p.tensor) {
        ASSERT_EQ(a.nbytes, b.nbytes) << name;
        EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name << " changed but was not the perturbed tensor";
        continue;
      }
      EXPECT_EQ(a.shape.size(), 2u) << name;
      for (std::size_t i = 0; i < std::size_t(a.numel()); ++i) {
        const double want = value(a, i) * factor, got = value(b, i);
        ASSERT_NEAR(got, want, std::fabs(want) * (a.dtype == mi::io::DType::BF16 ? 0x1p-8 : 0x1p-23)) << name << " " << i;
      }
    }
  }
  EXPECT_EQ(kinds.size(), 2u) << "24 seeds drew only one kind of perturbation";
  EXPECT_GT(tensors.size(), 1u) << "24 seeds drew one tensor only";
}

}  // namespace
