// VDPBF16PS building blocks shared by the avx512bf16 and amx levels: the fast kernels (bf16 activations x bf16
// weights): dot form for decode and up to 8 tokens, packed bf16 pairs for prefill (the amx level uses tiles there). VDPBF16PS
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

// Decode step of the dot forms (impl::dot_block): one VDPBF16PS over 32 bf16 columns (16 pairs), bf16 weights and
// bf16 activations. A row of impl::dot_rows<DpBf16, T> for any T equals the lone dot_rows<DpBf16, 1> bitwise
// (impl::dot_block's contract).
struct DpBf16 {
  using W = bf16_t;
  using X = bf16_t;
  using Wv = __m512bh;
  using Xv = __m512bh;
  using Mask = __mmask32;
  static constexpr int kStep = 32;
  static Mask mask(int n) { return impl::mask32(n); }
  static Wv load_w(const W* p) { return load32(p); }
  static Wv load_w(const W* p, Mask m) { return load32(p, m); }
  static Xv load_x(const X* p) { return load32(p); }
  static Xv load_x(const X* p, Mask m) { return load32(p, m); }
  static __m512 step(__m512 acc, Wv w, Xv x) { return _mm512_dpbf16_ps(acc, w, x); }
};

// ---- prefill (more than kMaxDotTokens tokens): packed bf16 pairs -----------------------------------------------
// Outer-product form as impl::matmul (BLIS-style: a panel of kNR = 32 weight rows x kKC columns packed once, used by
// every token of an kMC block, kMR = 12 tokens at a time), but neither operand is widened: the panel holds bf16
// pairs, panel[p * 32 + r] = (W[r, 2p], W[r, 2p + 1]) as one 32-bit lane (low half = even column, the order
// VDPBF16PS pairs them), and each token's (x[2p], x[2p + 1]) is broadcast as one 32-bit value. Per pair of columns
// the micro-kernel does 2 panel loads, 12 broadcasts and 24 VDPBF16PS (64 multiply-adds each, 2 per column): twice
// the work per instruction of the f32 FMA kernel. A zero-padded last pair covers an odd column count.
// Which kernel runs is a tuning parameter (ckb/platforms [[tuning]] MI_TUNE_BF16_PREFILL): VDPBF16PS zmm throughput
// differs by vendor. Measured (one thread, 256 tokens x 3072 x 1024): AMD Zen 5 (EPYC "Turin") 292.6 GFLOP/s packed
// pairs against 141.7 for the FMA kernel; an Emerald Rapids Xeon retires VDPBF16PS zmm at 0.5 per cycle, where an
// earlier version of this kernel reached 75 GFLOP/s against 110-125 (bench/kernels). The results differ only in
// summation order (pairs are summed before they reach the accumulator), within the kernel contract's bound.
#ifndef MI_TUNE_BF16_PREFILL
#define MI_TUNE_BF16_PREFILL 1
#endif
static_assert(MI_TUNE_BF16_PREFILL == 0 || MI_TUNE_BF16_PREFILL == 1, "MI_TUNE_BF16_PREFILL: 0 or 1");

// dst[p * 32 + r] = (W[r, 2p], W[r, 2p + 1]) for r < nr, p < ceil(kc / 2); rows nr..31 and a lone last column's
// partner are zero. Rows are read in 16-pair chunks and transposed as 32-bit lanes (impl::transpose16x16).
inline void pack_pairs(const bf16_t* w, size_t ld, int nr, int kc, uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  for (int g = 0; g < 2; ++g) {
    const int r0 = 16 * g;
    for (int p = 0; p < pairs; p += 16) {
      const __mmask32 km = impl::mask32(kc - 2 * p);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] = r0 + i < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(km, w + size_t(r0 + i) * ld + 2 * p))
                           : _mm512_setzero_ps();
      impl::transpose16x16(t);
      const int pn = pairs - p < 16 ? pairs - p : 16;
      for (int j = 0; j < pn; ++j) _mm512_store_si512(dst + size_t(p + j) * impl::kNR + r0, _mm512_castps_si512(t[j]));
    }
  }
}

// Token pair (x[0], x[1]) as one 32-bit lane value, low half first (little-endian, as in memory).
inline int load_pair(const bf16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return int(v);
}

// Y[i, 0..nr) (+)= sum_k x[i, k] * W[r, k] for i < MR over the panel's kc columns.
template <int MR>
inline void micro_pairs(const uint32_t* panel, const bf16_t* x, size_t ldx, int kc, float* y, size_t ldy,
                        __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  const int full_pairs = kc / 2;
  for (int p = 0; p < full_pairs; ++p) {
    const __m512bh w0 = (__m512bh)_mm512_load_si512(panel + size_t(p) * impl::kNR);
    const __m512bh w1 = (__m512bh)_mm512_load_si512(panel + size_t(p) * impl::kNR + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(load_pair(x + i * ldx + 2 * p));
      c0[i] = _mm512_dpbf16_ps(c0[i], w0, xb);
      c1[i] = _mm512_dpbf16_ps(c1[i], w1, xb);
    }
  }
  if (kc & 1) {  // the last column alone: its partner is 0 in the panel and in x (never read past the row)
    const __m512bh w0 = (__m512bh)_mm512_load_si512(panel + size_t(full_pairs) * impl::kNR);
    const __m512bh w1 = (__m512bh)_mm512_load_si512(panel + size_t(full_pairs) * impl::kNR + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[i * ldx + kc - 1].bits));
      c0[i] = _mm512_dpbf16_ps(c0[i], w0, xb);
      c1[i] = _mm512_dpbf16_ps(c1[i], w1, xb);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    if (accumulate) {
      c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, yi));
      c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, yi + 16));
    }
    _mm512_mask_storeu_ps(yi, m0, c0[i]);
    _mm512_mask_storeu_ps(yi + 16, m1, c1[i]);
  }
}


// Stack use: 16 KiB packed panel.
inline void matmul_pairs(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int M,
                         int rows, int cols) {
  alignas(64) uint32_t panel[(impl::kKC / 2) * impl::kNR];
  for (int m0 = 0; m0 < M; m0 += impl::kMC) {
    const int mc = M - m0 < impl::kMC ? M - m0 : impl::kMC;
    for (int r0 = 0; r0 < rows; r0 += impl::kNR) {
      const int nr = rows - r0 < impl::kNR ? rows - r0 : impl::kNR;
      const __mmask16 rm0 = impl::mask16(nr), rm1 = impl::mask16(nr - 16);
      for (int k0 = 0; k0 < cols; k0 += impl::kKC) {
        const int kc = cols - k0 < impl::kKC ? cols - k0 : impl::kKC;
        pack_pairs(w + size_t(r0) * ld + k0, ld, nr, kc, panel);
        for (int i0 = 0; i0 < mc; i0 += impl::kMR) {
          const int mr = mc - i0 < impl::kMR ? mc - i0 : impl::kMR;
          impl::with_mr(mr, [&](auto MR) {
            micro_pairs<decltype(MR)::value>(panel, x + size_t(m0 + i0) * ldx + k0, ldx, kc, y + size_t(m0 + i0) * ldy + r0, ldy, rm0,
                            rm1, k0 > 0);
          });
        }
      }
    }
  }
}

// The fast product of at most kMaxDotTokens tokens (decode, batched decode, short chunks) of the amx level, and of
// the avx512bf16 level when MI_TUNE_BF16_DECODE = 1 (avx512bf16.cpp): VDPBF16PS in dot form, the weights streamed
// once for all tokens, every token's row equal to its lone dot_rows<DpBf16, 1> bitwise.
inline void matmul_fast_few(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int M,
                            int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return impl::zero_outputs(y, ldy, M, rows);
  if (M > impl::kMaxDotTokens) return impl::matmul(w, ld, x, ldx, y, ldy, M, rows, cols);  // not reached from amx
  impl::dot_rows_tokens<DpBf16>(w, ld, x, ldx, y, ldy, M, rows, cols);
}
}  // namespace bf16_dot_impl
}  // namespace
}  // namespace mi::kernels

#pragma GCC diagnostic pop
