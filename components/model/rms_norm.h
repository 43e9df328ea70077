// RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm / Qwen3RMSNorm): y = x / sqrt(mean(x^2) + eps) * w, in f32.
// Used over the hidden state (input_layernorm, post_attention_layernorm, final norm) and, in Qwen3, per attention
// head over head_dim (q_norm / k_norm, applied to every head of q and k before rotary).
// Norm weights are tiny vectors; they are widened to f32 once at load (widen_norm_weight) because K::rmsnorm
// takes f32 weights.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/bf16.h"
#include "runtime/thread_pool.h"

namespace mi::model {

inline std::vector<float> widen_norm_weight(const bf16_t* w, int n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out[std::size_t(i)] = bf16_to_f32(w[i]);
  return out;
}

// Elements a norm chunk should cover before handing work to another thread pays: a row of 1024 floats takes ~0.1 us,
// a pool wake-up microseconds (milliseconds when the machine is shared), and the profile of a batched decode step
// (ENGINE bench --profile, 0.6B, B = 8) showed the norms of 8 rows taking ~100x the time of one row when split.
inline constexpr int kNormElementsPerChunk = 16384;

// x, y [rows, n] (row stride n); w [n]. y must not alias x.
template <class K>
void rms_norm_rows(runtime::ThreadPool& pool, const float* x, const float* w, float* y, int rows, int n, float eps) {
  pool.parallel_for(rows, std::max(1, kNormElementsPerChunk / std::max(n, 1)), [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) K::rmsnorm(x + std::size_t(r) * n, w, y + std::size_t(r) * n, n, eps);
  });
}

// Per-head RMSNorm: x, y [rows, heads * head_dim]; every head_dim slice is normalised with the shared w [head_dim].
// y must not alias x.
template <class K>
void head_rms_norm(runtime::ThreadPool& pool, const float* x, const float* w, float* y, int rows, int heads,
                   int head_dim, float eps) {
  const int slices = rows * heads;
  pool.parallel_for(slices, std::max(16, kNormElementsPerChunk / std::max(head_dim, 1)), [&](int s0, int s1) {
    for (int s = s0; s < s1; ++s)
      K::rmsnorm(x + std::size_t(s) * head_dim, w, y + std::size_t(s) * head_dim, head_dim, eps);
  });
}

}  // namespace mi::model
