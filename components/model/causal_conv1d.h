// Causal depthwise conv1d with a rolling state, followed by SiLU: the short convolution in front of the gated delta
// rule of Gated DeltaNet layers (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025, sec. 3; the
// short-conv-then-SiLU on q/k/v follows the DeltaNet design of Yang et al. 2024). Each of the C channels has its own
// kernel of width K and no bias:
//   y[t, c] = silu( sum_{j<K} w[c, j] * in[t - (K-1) + j, c] )
// where in[s] for s < 0 (before this call's first token) comes from the state: the previous K-1 inputs of the
// sequence, oldest first, zeros at the start of a sequence. After the call the state holds the last K-1 inputs.
//
// The sum for one output is always taken in the same order (j = 0 .. K-1, in f32), whatever the split of the
// sequence into calls, so feeding a sequence at once, token by token or in arbitrary chunks is bitwise identical
// (tests/unit/model/causal_conv1d_test.cpp).
//
// Weights: the checkpoint stores conv1d.weight as bf16 [C, 1, K]; widen it once at load to f32 [C, K]
// (widen_norm_weight(w, C * K) from rms_norm.h does exactly that). Nothing here allocates.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "runtime/thread_pool.h"

namespace mi::model {

struct Conv1dDims {
  int channels = 0;  // C
  int kernel = 0;    // K (4 in Qwen3-Next / Qwen3.5)
};

// Floats of rolling state per sequence and conv layer: [K-1, C].
inline std::size_t conv1d_state_floats(const Conv1dDims& d) {
  return std::size_t(std::max(d.kernel - 1, 0)) * std::size_t(d.channels);
}

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Channels one chunk should cover before a pool wake-up pays (as the norms: ~16k multiply-adds).
inline constexpr int kConvElementsPerChunk = 16384;

//   x     [T, C] row stride ldx (e.g. the conv channels are the first C columns of an in_proj output)
//   w     [C, K] f32 (widened once)
//   state [K-1, C] in/out: previous K-1 inputs, oldest first
//   y     [T, C] row stride ldy; must not alias x (the state update reads x after y is written)
template <class K>
void causal_conv1d_silu(runtime::ThreadPool& pool, const Conv1dDims& d, const float* x, std::size_t ldx, int T,
                        const float* w, float* state, float* y, std::size_t ldy) {
  const int C = d.channels, KW = d.kernel;
  if (C <= 0 || KW <= 0 || T < 0) fail("causal_conv1d: bad dims C=", C, " K=", KW, " T=", T);
  const int H = KW - 1;  // history rows held in the state
  const std::size_t uC = std::size_t(C);
  // Input row s of the virtual sequence [state; x]: s in [-H, T).
  auto input = [&](int s, int c) -> float {
    return s < 0 ? state[std::size_t(s + H) * uC + std::size_t(c)] : x[std::size_t(s) * ldx + std::size_t(c)];
  };
  const int grain = std::max(1, kConvElementsPerChunk / std::max(1, T * KW));
  pool.parallel_for(C, grain, [&](int c0, int c1) {
    for (int t = 0; t < T; ++t) {
      float* yrow = y + std::size_t(t) * ldy;
      for (int c = c0; c < c1; ++c) {
        const float* wc = w + std::size_t(c) * std::size_t(KW);
        float acc = 0.0f;
        for (int j = 0; j < KW; ++j) acc += wc[j] * input(t - H + j, c);
        yrow[c] = silu(acc);
      }
    }
    // Roll the state of these channels: the last H rows of [state; x]. Rows are moved oldest first, and row r
    // reads source row T + r >= r of the virtual sequence, so reading the old state in place is safe.
    for (int r = 0; r < H; ++r) {
      const int s = T - H + r;  // virtual row that becomes state row r
      for (int c = c0; c < c1; ++c) state[std::size_t(r) * uC + std::size_t(c)] = input(s, c);
    }
  });
}

// Batched decode: row b of x is the one new token of a sequence whose state is states[b] ([K-1, C] each).
//   x [B, C] row stride ldx, y [B, C] row stride ldy. Equals B calls of causal_conv1d_silu with T = 1.
template <class K>
void causal_conv1d_silu_decode_batch(runtime::ThreadPool& pool, const Conv1dDims& d, const float* x, std::size_t ldx,
                                     int B, const float* w, float* const* states, float* y, std::size_t ldy) {
  const int C = d.channels, KW = d.kernel;
  if (C <= 0 || KW <= 0 || B < 0) fail("causal_conv1d: bad dims C=", C, " K=", KW, " B=", B);
  const int H = KW - 1;
  const std::size_t uC = std::size_t(C);
  pool.parallel_for(B * C, std::max(1, kConvElementsPerChunk / KW), [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      const int b = i / C, c = i % C;
      float* st = states[b];
      const float xv = x[std::size_t(b) * ldx + std::size_t(c)];
      const float* wc = w + std::size_t(c) * std::size_t(KW);
      float acc = 0.0f;  // same order as causal_conv1d_silu: history oldest first, then the new input
      for (int j = 0; j < H; ++j) acc += wc[j] * st[std::size_t(j) * uC + std::size_t(c)];
      acc += wc[H] * xv;
      y[std::size_t(b) * ldy + std::size_t(c)] = silu(acc);
      for (int j = 0; j + 1 < H; ++j) st[std::size_t(j) * uC + std::size_t(c)] = st[std::size_t(j + 1) * uC + std::size_t(c)];
      if (H > 0) st[std::size_t(H - 1) * uC + std::size_t(c)] = xv;
    }
  });
}

}  // namespace mi::model
