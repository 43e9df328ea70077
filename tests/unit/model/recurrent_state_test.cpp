// model/recurrent_state.h: the per-sequence conv + delta-rule state beside the KV blocks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "common/error.h"
#include "model/recurrent_state.h"

using mi::model::RecurrentStateCache;
using mi::model::RecurrentStateShape;

namespace {
// qwen3_5-tiny: 3 linear layers, conv over q|k|v = 2*16 + 2*16 + 4*16 = 128 channels, kernel 4.
RecurrentStateShape tiny_shape(int max_sequences) {
  return {.linear_layers = 3,
          .conv = {.channels = 128, .kernel = 4},
          .delta = {.k_heads = 2, .v_heads = 4, .k_dim = 16, .v_dim = 16},
          .max_sequences = max_sequences};
}
}  // namespace

TEST(RecurrentState, ZeroAtStartDisjointViewsAndClearOneSequence) {
  RecurrentStateCache cache(tiny_shape(2));
  const std::size_t conv = 3 * 128, delta = 4 * 16 * 16;
  EXPECT_EQ(cache.floats_per_sequence(), 3 * (conv + delta));
  EXPECT_EQ(cache.bytes(), 2 * cache.floats_per_sequence() * sizeof(float));
  // Every view of every (sequence, layer) is zero and they do not overlap.
  std::set<float*> starts;
  for (int s = 0; s < 2; ++s)
    for (int l = 0; l < 3; ++l) {
      float* c = cache.conv(s, l);
      float* d = cache.delta(s, l);
      EXPECT_EQ(d, c + conv);
      if (l + 1 < 3) {
        EXPECT_EQ(cache.conv(s, l + 1), d + delta);
      }
      for (std::size_t i = 0; i < conv; ++i) ASSERT_EQ(c[i], 0.0f);
      for (std::size_t i = 0; i < delta; ++i) ASSERT_EQ(d[i], 0.0f);
      EXPECT_TRUE(starts.insert(c).second);
    }
  // Write both sequences; clearing sequence 0 leaves sequence 1 alone.
  for (int s = 0; s < 2; ++s)
    for (int l = 0; l < 3; ++l) {
      cache.conv(s, l)[5] = 1.0f + s;
      cache.delta(s, l)[delta - 1] = 2.0f + s;
    }
  cache.clear(0);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(cache.conv(0, l)[5], 0.0f);
    EXPECT_EQ(cache.delta(0, l)[delta - 1], 0.0f);
    EXPECT_EQ(cache.conv(1, l)[5], 2.0f);
    EXPECT_EQ(cache.delta(1, l)[delta - 1], 3.0f);
  }
}

TEST(RecurrentState, OutOfRangeIsAnError) {
  RecurrentStateCache cache(tiny_shape(2));
  EXPECT_THROW(cache.conv(2, 0), mi::Error);
  EXPECT_THROW(cache.delta(-1, 0), mi::Error);
  EXPECT_THROW(cache.conv(0, 3), mi::Error);
  EXPECT_THROW(cache.clear(2), mi::Error);
  EXPECT_THROW(RecurrentStateCache(tiny_shape(0)), mi::Error);
}
