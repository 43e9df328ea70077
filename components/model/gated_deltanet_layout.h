// The projection layout of Qwen3-Next's Gated DeltaNet layers, reduced to Qwen3.5's. Qwen3-Next fuses the input
// projections and groups their rows per KEY head (r = v_heads / k_heads value heads per key head):
//   in_proj_qkvz rows, per key head h: [ q (dk) | k (dk) | v (r*dv) | z (r*dv) ]
//   in_proj_ba   rows, per key head h: [ b (r) | a (r) ]
// Qwen3.5 keeps them apart, in the order the causal conv1d's channels use (conv1d.weight [2*k_heads*dk +
// v_heads*dv, 1, K] in both families): mixed = [ q of every key head | k of every key head | v of every value head ],
// then z [v_heads*dv], b [v_heads], a [v_heads]. Value head h*r + j is the j-th value head of key head h in both.
// (HF Qwen3NextGatedDeltaNet.fix_query_key_value_ordering states the same regrouping.)
//
// The engine runs the fused projections as they are stored (one matmul each, weights read once) and regroups their
// outputs here, which is T * (2*k_heads*dk + 2*v_heads*dv + 2*v_heads) float copies: nothing next to the matmuls.
#pragma once
#include <algorithm>
#include <cstddef>

#include "model/gated_delta_rule.h"

namespace mi::model {

//   qkvz  [T, k_heads * (2*dk + 2*r*dv)]   the in_proj_qkvz output
//   ba    [T, 2 * v_heads]                 the in_proj_ba output
//   mixed [T, 2*k_heads*dk + v_heads*dv]   q | k | v, the conv1d input
//   z     [T, v_heads * dv];  b, a [T, v_heads]
inline void regroup_grouped_gdn_projections(const GatedDeltaDims& d, const float* qkvz, const float* ba, int T,
                                            float* mixed, float* z, float* b, float* a) {
  const std::size_t dk = std::size_t(d.k_dim), dv = std::size_t(d.v_dim), nk = std::size_t(d.k_heads);
  const std::size_t r = std::size_t(d.v_heads / d.k_heads), nv = std::size_t(d.v_heads);
  const std::size_t group = 2 * dk + 2 * r * dv, qkvz_row = nk * group;
  const std::size_t key_width = nk * dk, mixed_row = 2 * key_width + nv * dv, z_row = nv * dv;
  for (std::size_t t = 0; t < std::size_t(T); ++t) {
    const float* src = qkvz + t * qkvz_row;
    float* m = mixed + t * mixed_row;
    for (std::size_t h = 0; h < nk; ++h) {
      const float* g = src + h * group;
      std::copy_n(g, dk, m + h * dk);                                   // q of key head h
      std::copy_n(g + dk, dk, m + key_width + h * dk);                  // k of key head h
      std::copy_n(g + 2 * dk, r * dv, m + 2 * key_width + h * r * dv);  // v of value heads h*r .. h*r+r-1
      std::copy_n(g + 2 * dk + r * dv, r * dv, z + t * z_row + h * r * dv);
      std::copy_n(ba + t * 2 * nv + h * 2 * r, r, b + t * nv + h * r);
      std::copy_n(ba + t * 2 * nv + h * 2 * r + r, r, a + t * nv + h * r);
    }
  }
}

}  // namespace mi::model
