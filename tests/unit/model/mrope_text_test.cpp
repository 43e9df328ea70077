// Interleaved M-RoPE axis selection (model/mrope_text.h) and its reduction to the plain position for text tokens.
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/mrope_text.h"

namespace {

using mi::model::MropeAxis;

TEST(MropeText, InterleavedAxisLayout) {
  // Qwen3.5's 8 rotated dims (head_dim 32 x 0.25): section [2, 1, 1] over 4 frequencies -> t h w t.
  const std::array<int, 3> s = {2, 1, 1};
  EXPECT_EQ(mi::model::mrope_axis(0, s), MropeAxis::t);
  EXPECT_EQ(mi::model::mrope_axis(1, s), MropeAxis::h);
  EXPECT_EQ(mi::model::mrope_axis(2, s), MropeAxis::w);
  EXPECT_EQ(mi::model::mrope_axis(3, s), MropeAxis::t);
  // The released models' [11, 11, 10] over 32 frequencies: h at 1, 4, .., 31; w at 2, 5, .., 29; the rest t.
  const std::array<int, 3> big = {11, 11, 10};
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 32; ++i) ++counts[static_cast<int>(mi::model::mrope_axis(i, big))];
  EXPECT_EQ(counts[0], 11);
  EXPECT_EQ(counts[1], 11);
  EXPECT_EQ(counts[2], 10);
  EXPECT_EQ(mi::model::mrope_axis(31, big), MropeAxis::h);
  EXPECT_EQ(mi::model::mrope_axis(32 - 3, big), MropeAxis::w);
}

TEST(MropeText, TextPositionsAreThePlainPosition) {
  const std::array<int, 3> s = {11, 11, 10};
  for (int p : {0, 1, 7, 4095})
    for (int i = 0; i < 32; ++i) EXPECT_EQ(mi::model::mrope_position(i, s, {p, p, p}), p);
  // Distinct axes (an image token) would not reduce: the check is not vacuous.
  bool differs = false;
  for (int i = 0; i < 32; ++i) differs = differs || mi::model::mrope_position(i, s, {5, 6, 7}) != 5;
  EXPECT_TRUE(differs);
}

TEST(MropeText, SectionsMustCoverTheRotaryDims) {
  EXPECT_NO_THROW(mi::model::check_text_mrope({2, 1, 1}, 8));
  EXPECT_THROW(mi::model::check_text_mrope({2, 1, 2}, 8), mi::Error);
  EXPECT_THROW(mi::model::check_text_mrope({-1, 3, 2}, 8), mi::Error);
}

}  // namespace
