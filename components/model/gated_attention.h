// Output-gated attention (Qwen3-Next / Qwen3.5 full-attention layers; the head-wise sigmoid gate after attention of
// Qiu et al. 2025, "Gated Attention for Large Language Models"): q_proj produces, per head, head_dim query values
// followed by head_dim gate values, and the attention output of each head is multiplied elementwise by
// sigmoid(gate) before o_proj:
//   q_proj output [T, heads * 2 * head_dim] = per head [query (head_dim) | gate (head_dim)]
//   out_head *= sigmoid(gate_head)
// Partial rotary on q/k is RotaryTable's rotary_dim (model/rotary.h), not this file.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "runtime/thread_pool.h"

namespace mi::model {

// De-interleaves the q_proj output into contiguous queries and gates (both [T, heads * head_dim]), so the query
// rows have the layout the attention block expects.
//   qg [T, heads * 2 * head_dim]; q, gate [T, heads * head_dim]
inline void split_query_gate(const float* qg, int T, int heads, int head_dim, float* q, float* gate) {
  const std::size_t d = std::size_t(head_dim), row = std::size_t(heads) * d;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      const float* src = qg + std::size_t(t) * 2 * row + std::size_t(h) * 2 * d;
      std::memcpy(q + std::size_t(t) * row + std::size_t(h) * d, src, sizeof(float) * d);
      std::memcpy(gate + std::size_t(t) * row + std::size_t(h) * d, src + d, sizeof(float) * d);
    }
}

// out[t, i] *= sigmoid(gate[t, i]) over the heads * head_dim values of each row.
//   out [T, heads * head_dim] row stride ldo;  gate [T, heads * head_dim] row stride ldg
inline void apply_output_gate(runtime::ThreadPool& pool, float* out, std::size_t ldo, const float* gate,
                              std::size_t ldg, int T, int heads, int head_dim) {
  const int n = heads * head_dim;
  pool.parallel_for(T, std::max(1, 16384 / std::max(n, 1)), [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      float* o = out + std::size_t(t) * ldo;
      const float* g = gate + std::size_t(t) * ldg;
      for (int i = 0; i < n; ++i) o[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    }
  });
}

}  // namespace mi::model
