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

#include "kernels/row_streams.h"

namespace mi::kernels {
namespace {
namespace avx512_int8 {

using std::size_t;

inline __mmask16 lanes(int n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u); }

// 16 int8 -> 16 f32 (exact).
inline __m512 load_q16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 load_q16(const int8_t* p, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

// ---- decode -----------------------------------------------------------------------------------------------
// R rows at a time, 64 columns (one cache line of each row) per step, two accumulators per row (2R independent
// FMA chains). The decode matvec is bound by the weight stream, so the R rows of a block come from R far-apart row
// groups (row_streams.h): R long sequential streams, each prefetched kStreamPrefetchBytes ahead, as the bf16 kernels
// read them (avx512_impl.h, MI_TUNE_ROW_STREAMS = 1; measured there on AMD Zen 5: 69-72 GB/s against 49-52 for
// adjacent rows with the next block prefetched). Block row r is row q + r * row_step, its output y[r * y_step].
// Prefetches past the last row never fault.

template <int R>
inline void dot_rows(const int8_t* q, const float* scale, size_t row_step, size_t ahead, const float* x, float* y,
                     size_t y_step, int cols) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 64 <= cols; c += 64) {
    const __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16), x2 = _mm512_loadu_ps(x + c + 32),
                 x3 = _mm512_loadu_ps(x + c + 48);
    for (int r = 0; r < R; ++r) {
      const int8_t* row = q + size_t(r) * row_step + c;
      prefetch_weights(row + ahead);
      acc0[r] = _mm512_fmadd_ps(load_q16(row), x0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(load_q16(row + 16), x1, acc1[r]);
      acc0[r] = _mm512_fmadd_ps(load_q16(row + 32), x2, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(load_q16(row + 48), x3, acc1[r]);
    }
  }
  for (; c < cols; c += 16) {  // at most three masked steps
    const __mmask16 m = lanes(cols - c);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, x + c);
    for (int r = 0; r < R; ++r) acc0[r] = _mm512_fmadd_ps(load_q16(q + size_t(r) * row_step + c, m), x0, acc0[r]);
  }
  for (int r = 0; r < R; ++r)
    y[r * y_step] = scale[r * y_step] * _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

inline void matvec(const int8_t* q, const float* scale, size_t ld, const float* x, float* y, int rows, int cols) {
  constexpr int R = 4;  // row streams per block, as the bf16 decode kernel
  for_row_streams<R>(
      rows,
      [&](int i, int n) {
        dot_rows<R>(q + size_t(i) * ld, scale + i, size_t(n) * ld, kStreamPrefetchBytes, x, y + i, size_t(n), cols);
      },
      [&](int r) { dot_rows<1>(q + size_t(r) * ld, scale + r, ld, ld, x, y + r, 1, cols); });
}

// ---- batched decode: one row x T tokens (T <= kMaxDotTokens) ---------------------------------------------------
// Each weight vector is converted once and used for all T tokens (the conversion, not the FMA, is the costly part
// of an int8 step); token t's accumulators see exactly the FMAs of dot_rows<R> for that token alone (acc0/acc1 in the
// same column order, the same masked tail, the same final sum and scale), so a batched row equals the lone matvec
// bitwise and an int8 engine's greedy output does not depend on what a request is batched with. 2T accumulators +
// 4 weight vectors, activations as memory operands: 20 zmm at T = 8.
constexpr int kMaxDotTokens = 8;

template <int T>
inline void dot_row_tokens(const int8_t* row, float scale, size_t ld, const float* x, size_t ldx, float* y,
                           size_t ldy, int cols) {
  __m512 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 64 <= cols; c += 64) {
    // The next row's same line, into L1: with MI_TUNE_DOT_PREFETCH's L2 hint this kernel ran 86-87 -> 92-96 ms per
    // B = 8 step of the 0.6B engine (AMD Zen 4); the lone decode above takes the L2 hint (within that host's noise:
    // 17-23 against 20-31 ms per step).
    _mm_prefetch(reinterpret_cast<const char*>(row + ld + c), _MM_HINT_T0);
    const __m512 w0 = load_q16(row + c), w1 = load_q16(row + c + 16), w2 = load_q16(row + c + 32),
                 w3 = load_q16(row + c + 48);
    for (int t = 0; t < T; ++t) {
      const float* xt = x + size_t(t) * ldx + c;
      acc0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xt + 16), acc1[t]);
      acc0[t] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(xt + 32), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(xt + 48), acc1[t]);
    }
  }
  for (; c < cols; c += 16) {  // at most three masked steps
    const __mmask16 m = lanes(cols - c);
    const __m512 w0 = load_q16(row + c, m);
    for (int t = 0; t < T; ++t)
      acc0[t] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x + size_t(t) * ldx + c), acc0[t]);
  }
  for (int t = 0; t < T; ++t) y[size_t(t) * ldy] = scale * _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
}

template <int T>
inline void dot_rows_tokens(const int8_t* q, const float* scale, size_t ld, const float* x, size_t ldx, float* y,
                            size_t ldy, int rows, int cols) {
  for (int r = 0; r < rows; ++r) dot_row_tokens<T>(q + size_t(r) * ld, scale[r], ld, x, ldx, y + r, ldy, cols);
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
    const __mmask16 m = lanes(c1 - c);
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
  switch (M) {
    case 1: return matvec(q, scale, ld, x, y, rows, cols);
    case 2: return dot_rows_tokens<2>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 3: return dot_rows_tokens<3>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 4: return dot_rows_tokens<4>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 5: return dot_rows_tokens<5>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 6: return dot_rows_tokens<6>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 7: return dot_rows_tokens<7>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    case 8: return dot_rows_tokens<8>(q, scale, ld, x, ldx, y, ldy, rows, cols);
    default: break;
  }
  if (cols <= 0) {
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < rows; ++r) y[size_t(m) * ldy + r] = 0.0f;
    return;
  }
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
          _mm512_mask_storeu_ps(widened + size_t(r) * kKC + (c - c0), lanes(c1 - c), load_q16(qs + size_t(r) * ld + c, lanes(c1 - c)));
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
