// VDPBF16PS building blocks shared by the avx512bf16 and amx levels: the memory-bound fast kernels (bf16
// activations x bf16 weights in dot form, decode and prefills of fewer than 4 tokens). VDPBF16PS
// (_mm512_dpbf16_ps): lane i += a[2i]*b[2i] + a[2i+1]*b[2i+1], so one instruction does 32 bf16 multiply-adds into
// 16 f32 lanes and neither operand needs widening.
//
// Include only from a translation unit compiled with the avx512bf16 flags, after kernels/avx512/avx512_impl.h.
// Internal linkage on purpose, for the reason given in avx512_impl.h.
#pragma once
#include "kernels/avx512/avx512_impl.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in its own headers (GCC bug 105593)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mi::kernels {
namespace {
namespace bf16_dot_impl {
namespace impl = avx512_impl;
using std::size_t;

// 32 bf16 values (16 pairs) as the operand type of VDPBF16PS; masked-off elements read as +0.
inline __m512bh load32(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load32(const bf16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// Decode: R weight rows x T tokens, 2*R*T accumulators over 64-column steps, prefetching the next R rows (see
// impl::dot_block).
template <int R, int T>
inline void dp_block(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int cols) {
  __m512 acc0[T][R], acc1[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc0[t][r] = acc1[t][r] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 64 <= cols; c += 64) {
    __m512bh x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = load32(x + t * ldx + c);
      x1[t] = load32(x + t * ldx + c + 32);
    }
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w + (r + R) * ld + c), _MM_HINT_T0);  // next block's rows
      const __m512bh w0 = load32(w + r * ld + c), w1 = load32(w + r * ld + c + 32);
      for (int t = 0; t < T; ++t) {
        acc0[t][r] = _mm512_dpbf16_ps(acc0[t][r], w0, x0[t]);
        acc1[t][r] = _mm512_dpbf16_ps(acc1[t][r], w1, x1[t]);
      }
    }
  }
  for (; c < cols; c += 32) {  // at most two masked steps
    const __mmask32 m = impl::mask32(cols - c);
    __m512bh x0[T];
    for (int t = 0; t < T; ++t) x0[t] = load32(x + t * ldx + c, m);
    for (int r = 0; r < R; ++r) {
      const __m512bh w0 = load32(w + r * ld + c, m);
      for (int t = 0; t < T; ++t) acc0[t][r] = _mm512_dpbf16_ps(acc0[t][r], w0, x0[t]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t][r], acc1[t][r]));
}

template <int T>
inline void dp_rows(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int rows,
                    int cols) {
  constexpr int R = impl::kDotRows<T>;
  int r = 0;
  for (; r + R <= rows; r += R) dp_block<R, T>(w + size_t(r) * ld, ld, x, ldx, y + r, ldy, cols);
  for (; r < rows; ++r) dp_block<1, T>(w + size_t(r) * ld, ld, x, ldx, y + r, ldy, cols);
}

// Prefill. For M < 4 the weights are streamed once in dot form with VDPBF16PS (memory-bound, as decode). For
// larger M the kernel is compute-bound and uses the register-blocked f32 FMA kernel of the avx512 level (both
// operands widened exactly): measured on an Emerald Rapids Xeon (family 6 model 207), VDPBF16PS zmm retires at
// 0.5 per cycle against 2 per cycle for VFMADD231PS zmm, i.e. 32 against 64 flop/cycle, and a packed bf16-pair
// VDPBF16PS micro-kernel (12 tokens x 32 rows, kept in git history) reached 75 GFLOP/s against 110-125 GFLOP/s for
// the FMA kernel at M = 128 (bench/kernels). Both give the same result semantics up to summation order.
inline void matmul_fast(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int M, int rows,
                 int cols) {
  if (M >= impl::kMinTokensForBlocking || M <= 0 || rows <= 0 || cols <= 0)
    return impl::matmul(w, ld, x, ldx, y, ldy, M, rows, cols);
  int m = 0;
  for (; m + 3 <= M; m += 3) dp_rows<3>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
  if (M - m == 2) dp_rows<2>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
  if (M - m == 1) dp_rows<1>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
}
}  // namespace bf16_dot_impl
}  // namespace
}  // namespace mi::kernels

#pragma GCC diagnostic pop
