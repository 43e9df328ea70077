// Qwen3-Next's fused Gated DeltaNet projections regrouped into Qwen3.5's layout (model/gated_deltanet_layout.h),
// against the layout as HF's Qwen3NextGatedDeltaNet.fix_query_key_value_ordering states it: per key head h, the
// in_proj_qkvz rows are [q (dk) | k (dk) | v (r*dv) | z (r*dv)] and the in_proj_ba rows [b (r) | a (r)], and value
// head h*r + j is the j-th value head of key head h. Every source element is tagged with what it is, so a misplaced
// copy names itself.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "model/gated_deltanet_layout.h"

namespace {

// A tag: part (0 q, 1 k, 2 v, 3 z, 4 b, 5 a), key head, index within the key head's part, token.
float tag(int part, int head, int index, int token) { return float(part * 100000 + token * 10000 + head * 1000 + index); }

TEST(GatedDeltanetLayout, RegroupsFusedProjectionsPerKeyHeadIntoTheSeparateLayout) {
  for (const auto& [k_heads, v_heads, dk, dv] : std::vector<std::array<int, 4>>{{2, 4, 3, 2}, {1, 1, 4, 4}, {3, 6, 2, 5}}) {
    SCOPED_TRACE("k_heads " + std::to_string(k_heads) + " v_heads " + std::to_string(v_heads));
    const mi::model::GatedDeltaDims d{k_heads, v_heads, dk, dv};
    const int r = v_heads / k_heads, T = 2;
    // The fused sources, written from the per-key-head layout.
    std::vector<float> qkvz, ba;
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < k_heads; ++h) {
        for (int i = 0; i < dk; ++i) qkvz.push_back(tag(0, h, i, t));
        for (int i = 0; i < dk; ++i) qkvz.push_back(tag(1, h, i, t));
        for (int i = 0; i < r * dv; ++i) qkvz.push_back(tag(2, h, i, t));
        for (int i = 0; i < r * dv; ++i) qkvz.push_back(tag(3, h, i, t));
      }
      for (int h = 0; h < k_heads; ++h) {
        for (int j = 0; j < r; ++j) ba.push_back(tag(4, h, j, t));
        for (int j = 0; j < r; ++j) ba.push_back(tag(5, h, j, t));
      }
    }
    const int mixed_row = 2 * k_heads * dk + v_heads * dv;
    std::vector<float> mixed(std::size_t(T * mixed_row), -1), z(std::size_t(T * v_heads * dv), -1),
        b(std::size_t(T * v_heads), -1), a(std::size_t(T * v_heads), -1);
    mi::model::regroup_grouped_gdn_projections(d, qkvz.data(), ba.data(), T, mixed.data(), z.data(), b.data(), a.data());
    for (int t = 0; t < T; ++t) {
      const float* m = mixed.data() + t * mixed_row;
      for (int h = 0; h < k_heads; ++h)
        for (int i = 0; i < dk; ++i) {
          EXPECT_EQ(m[h * dk + i], tag(0, h, i, t)) << "q head " << h << " dim " << i;
          EXPECT_EQ(m[k_heads * dk + h * dk + i], tag(1, h, i, t)) << "k head " << h << " dim " << i;
        }
      for (int vh = 0; vh < v_heads; ++vh) {  // value head vh = key head vh / r, its (vh % r)-th
        const int h = vh / r, j = vh % r;
        for (int i = 0; i < dv; ++i) {
          EXPECT_EQ(m[2 * k_heads * dk + vh * dv + i], tag(2, h, j * dv + i, t)) << "v head " << vh;
          EXPECT_EQ(z[std::size_t(t * v_heads * dv + vh * dv + i)], tag(3, h, j * dv + i, t)) << "z head " << vh;
        }
        EXPECT_EQ(b[std::size_t(t * v_heads + vh)], tag(4, h, j, t)) << "b head " << vh;
        EXPECT_EQ(a[std::size_t(t * v_heads + vh)], tag(5, h, j, t)) << "a head " << vh;
      }
    }
  }
}

}  // namespace
