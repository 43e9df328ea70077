// AVX-512 (F/BW/VL/DQ) kernels for int8 weights with one f32 scale per row (ckb/contracts/int8_weights.toml),
// shared by the avx512 and avx512bf16 levels: y[r] = scale[r] * sum_c Q[r, c] * x[c] with f32 activations.
// 16 int8 weights are loaded (16 bytes), sign-extended to 32 bits (VPMOVSXBD) and converted to f32 (VCVTDQ2PS),
// both exact, then multiplied with FMA into f32 accumulators; the row's sum is scaled once at the end.
//
// Same linkage rule as avx512_impl.h: internal linkage only, so copies compiled with different ISA flags in two
// translation units are never merged. Include only from a TU compiled with the avx512 flags.
// Intrinsics semantics: Intel Intrinsics Guide / Intel SDM vol. 2 (VPMOVSXBD, VCVTDQ2PS, VMOVDQU8 with
// zero-masking: masked-off bytes are neither read nor faulted on, so the column tails never read past a row).
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in its own headers (GCC bug 105593)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/avx512/avx512_impl.h"
#include "kernels/row_streams.h"

namespace mi::kernels {
namespace {
namespace avx512_int8 {

using std::size_t;

// The loads (avx512_impl::load16 for int8: 16 int8 -> 16 f32, exact) and masks are the bf16 kernels'.
using avx512_impl::load16;
using avx512_impl::mask16;

// ---- decode and batched decode (1..kMaxDotTokens tokens) -----------------------------------------------------
// The dot forms of avx512_impl.h with an int8 step: the weights of one 16-column step sign-extended and converted
// to f32 (exact), one FMA per (row, token) into one accumulator, the row's sum scaled once at the end. So the int8
// kernels inherit the dot forms' blocking (R rows x T tokens per block: 4 far-apart row streams for one token, 3 x 8
// at 8 tokens, every converted weight vector used for all T tokens), their prefetch (MI_TUNE_DOT_PREFETCH) and
// their contract: each token's row of a batched step equals its lone matvec bitwise, so an int8 engine's greedy
// output does not depend on what a request is batched with. (Before, the batched kernel walked one row x T tokens
// with two accumulators each: an 8-token step of the 0.6B engine took 113-114 ms on AMD Zen 4 against 85-92 now;
// the conversion still keeps it slower than the bf16 fast engine's 56-59.)
using Int8Dot = avx512_impl::FmaDot<int8_t>;

constexpr int kMaxDotTokens = avx512_impl::kMaxDotTokens;

// y[t, r] = scale[r] * sum_c Q[r, c] x[t, c] for M in [1, kMaxDotTokens] tokens.
inline void dot_rows_tokens(const int8_t* q, const float* scale, size_t ld, const float* x, size_t ldx, float* y,
                            size_t ldy, int M, int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return avx512_impl::zero_outputs(y, ldy, M, rows);  // an empty sum; the dot forms expect columns
  avx512_impl::dot_rows_tokens<Int8Dot>(q, ld, x, ldx, y, ldy, M, rows, cols);
  for (int t = 0; t < M; ++t)
    for (int r = 0; r < rows; ++r) y[size_t(t) * ldy + r] *= scale[r];
}

inline void matvec(const int8_t* q, const float* scale, size_t ld, const float* x, float* y, int rows, int cols) {
  dot_rows_tokens(q, scale, ld, x, 0, y, 0, 1, rows, cols);
}

// ---- prefill (M > kMaxDotTokens) ----------------------------------------------------------------------------
// Widened once: a strip of 16 rows x kKC columns of Q is converted to f32 into a 32 KiB buffer (exact), and every
// token reads the f32 copy, so the int8 -> f32 conversion is paid once per strip and column block, not per token.
// R rows x T tokens per block, one accumulator per (row, token): every weight vector is used for T tokens and every
// activation vector for R rows (R*T FMAs per R + T loads). Partial sums of later column blocks are added to Y, and
// the scale is applied after the last one.
constexpr int kKC = 512;

// w is the widened strip: row r of the block at w + r * kKC, columns [0, c1 - c0) of the column block.
template <int R, int T>
inline void block(const float* w, const float* x, size_t ldx, float* y, size_t ldy, int c0, int c1, bool first) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  for (int c = c0; c < c1; c += 16) {
    const __mmask16 m = mask16(c1 - c);
    __m512 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + size_t(t) * ldx + c);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, w + size_t(r) * kKC + (c - c0));
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_fmadd_ps(wv, xv[t], acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) {
      const float s = _mm512_reduce_add_ps(acc[t][r]);
      float& out = y[size_t(t) * ldy + r];
      out = first ? s : out + s;
    }
}

// All rows for tokens [0, T) of one column block.
template <int T>
inline void block_rows(const float* w, const float* x, size_t ldx, float* y, size_t ldy, int rows, int c0, int c1,
                       bool first) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) block<4, T>(w + size_t(r) * kKC, x, ldx, y + r, ldy, c0, c1, first);
  for (; r < rows; ++r) block<1, T>(w + size_t(r) * kKC, x, ldx, y + r, ldy, c0, c1, first);
}

inline void matmul(const int8_t* q, const float* scale, size_t ld, const float* x, size_t ldx, float* y, size_t ldy,
                   int M, int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return avx512_impl::zero_outputs(y, ldy, M, rows);
  if (M <= kMaxDotTokens) return dot_rows_tokens(q, scale, ld, x, ldx, y, ldy, M, rows, cols);
  // 16-row strips: the widened column block (16 x kKC f32 = 32 KiB) stays in L1 across all tokens.
  constexpr int kStrip = 16;
  alignas(64) float widened[kStrip * kKC];
  for (int r0 = 0; r0 < rows; r0 += kStrip) {
    const int nr = rows - r0 < kStrip ? rows - r0 : kStrip;
    const int8_t* qs = q + size_t(r0) * ld;
    for (int c0 = 0; c0 < cols; c0 += kKC) {
      const int c1 = cols - c0 < kKC ? cols : c0 + kKC;
      for (int r = 0; r < nr; ++r)
        for (int c = c0; c < c1; c += 16)
          _mm512_mask_storeu_ps(widened + size_t(r) * kKC + (c - c0), mask16(c1 - c), load16(qs + size_t(r) * ld + c, mask16(c1 - c)));
      int m = 0;
      for (; m + 4 <= M; m += 4)
        block_rows<4>(widened, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy + r0, ldy, nr, c0, c1, c0 == 0);
      for (; m < M; ++m) block_rows<1>(widened, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy + r0, ldy, nr, c0, c1, c0 == 0);
    }
    for (int mm = 0; mm < M; ++mm)
      for (int r = 0; r < nr; ++r) y[size_t(mm) * ldy + r0 + r] *= scale[r0 + r];
  }
}

}  // namespace avx512_int8
}  // namespace
}  // namespace mi::kernels

#pragma GCC diagnostic pop
