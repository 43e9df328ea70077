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
// Outer-product form as impl::matmul (BLIS-style: a panel of up to kPairNR weight rows x kPairKC columns packed once,
// used by every token of a kPairMC block, kPairMR tokens at a time), but neither operand is widened: the panel holds
// bf16 pairs, panel[p * nr_pad + r] = (W[r, 2p], W[r, 2p + 1]) as one 32-bit lane (low half = even column, the order
// VDPBF16PS pairs them), and each token's (x[2p], x[2p + 1]) is broadcast as one 32-bit value. Per pair of columns
// the micro-kernel does NV panel loads, MR broadcasts and NV x MR VDPBF16PS (64 multiply-adds each, 2 per column):
// 3 x 8 = 24 accumulators, where the earlier pair kernel, in the f32 kernel's 2 x 12 shape, spent 12 broadcasts per
// 24; a panel's last rows take 1 or 2 vectors (nr_pad = 16 NV), so a 128-row block is 2 full panels and one of 32
// rows, not a third of a panel wasted. Measured on AMD Zen 4 (experience OPT-024): one core, 256 tokens x 3072 x
// 1024 in L3, 172-176 -> 190-198 GFLOP/s (a VDPBF16PS loop peaks at 226-234); 28 distinct matrices streamed from
// DRAM, medians, two threads 311-352 -> 361-389 over the 0.6B shapes. Every output still sums its pairs in column
// order within a kPairKC block and the blocks in order, so by construction (not by a test) the results are bitwise
// those of the 2 x 12 kernel.
// Which kernel runs is a tuning parameter (ckb/platforms [[tuning]] MI_TUNE_BF16_PREFILL): VDPBF16PS zmm throughput
// differs by vendor. Measured (one thread, 256 tokens x 3072 x 1024): AMD Zen 5 (EPYC "Turin") 292.6 GFLOP/s packed
// pairs against 141.7 for the FMA kernel; an Emerald Rapids Xeon retires VDPBF16PS zmm at 0.5 per cycle, where an
// earlier version of this kernel reached 75 GFLOP/s against 110-125 (bench/kernels). The results differ from the
// FMA kernel's only in summation order (pairs are summed before they reach the accumulator), within the kernel
// contract's bound.
#ifndef MI_TUNE_BF16_PREFILL
#define MI_TUNE_BF16_PREFILL 1
#endif
static_assert(MI_TUNE_BF16_PREFILL == 0 || MI_TUNE_BF16_PREFILL == 1, "MI_TUNE_BF16_PREFILL: 0 or 1");

constexpr int kPairNV = 3;              // panel vectors of 16 rows
constexpr int kPairNR = 16 * kPairNV;   // rows per panel
constexpr int kPairMR = 8;              // tokens per micro-kernel call
constexpr int kPairKC = impl::kKC;      // columns per panel (even: whole pairs)
constexpr int kPairMC = impl::kMC;      // tokens per block: the f32 kernel's (a prompt up to it packs panels once)
static_assert(kPairKC % 2 == 0, "a panel holds whole column pairs");

// dst[p * 16 nv + r] = (W[r, 2p], W[r, 2p + 1]) for r < nr <= 16 nv, p < ceil(kc / 2); rows nr..16 nv - 1 and a lone
// last column's partner are zero. Rows are read in 16-pair chunks and transposed as 32-bit lanes
// (impl::transpose16x16).
// A whole panel (16, 32 or 48 rows by kPairKC columns) is packed by impl::pack_whole_panel, counts known at compile
// time; measured in experience OPT-038.
inline void pack_pairs(const bf16_t* w, size_t ld, int nr, int nv, int kc, uint32_t* dst) {
  static_assert(kPairKC % 32 == 0, "whole 16-pair chunks");
  const auto whole = [&](auto n) {
    impl::pack_whole_panel<decltype(n)::value, kPairKC / 32>(
        [&](int r, int c) { return _mm512_castsi512_ps(_mm512_loadu_si512(w + size_t(r) * ld + 32 * c)); }, dst);
  };
  if (impl::dispatch_whole_panel<kPairNV, kPairKC>(nr, nv, kc, whole)) return;
  const int pairs = (kc + 1) / 2;
  const size_t stride = size_t(16 * nv);
  for (int g = 0; g < nv; ++g) {
    const int r0 = 16 * g;
    for (int p = 0; p < pairs; p += 16) {
      const __mmask32 km = impl::mask32(kc - 2 * p);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] = r0 + i < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(km, w + size_t(r0 + i) * ld + 2 * p))
                           : _mm512_setzero_ps();
      impl::transpose16x16(t);
      const int pn = pairs - p < 16 ? pairs - p : 16;
      for (int j = 0; j < pn; ++j) _mm512_store_si512(dst + size_t(p + j) * stride + r0, _mm512_castps_si512(t[j]));
    }
  }
}

// Token pair (x[0], x[1]) as one 32-bit lane value, low half first (little-endian, as in memory).
inline int load_pair(const bf16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return int(v);
}

// Y[i, 0..nr) (+)= sum_k x[i, k] * W[r, k] for i < MR over the panel's kc columns; the panel is NV vectors wide.
template <int NV, int MR>
inline void micro_pairs(const uint32_t* panel, const bf16_t* x, size_t ldx, int kc, float* y, size_t ldy,
                        const __mmask16* rm, bool accumulate) {
  __m512 c[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) c[i][v] = _mm512_setzero_ps();
  const auto pair_step = [&](const uint32_t* pw, auto&& pair_of) {
    __m512bh w[NV];
    for (int v = 0; v < NV; ++v) w[v] = (__m512bh)_mm512_load_si512(pw + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair_of(i));
      for (int v = 0; v < NV; ++v) c[i][v] = _mm512_dpbf16_ps(c[i][v], w[v], xb);
    }
  };
  const int full_pairs = kc / 2;
  for (int p = 0; p < full_pairs; ++p)
    pair_step(panel + size_t(p) * 16 * NV, [&](int i) { return load_pair(x + i * ldx + 2 * p); });
  if (kc & 1)  // the last column alone: its partner is 0 in the panel and in x (never read past the row)
    pair_step(panel + size_t(full_pairs) * 16 * NV, [&](int i) { return int(x[i * ldx + kc - 1].bits); });
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    for (int v = 0; v < NV; ++v) {
      if (accumulate) c[i][v] = _mm512_add_ps(c[i][v], _mm512_maskz_loadu_ps(rm[v], yi + 16 * v));
      _mm512_mask_storeu_ps(yi + 16 * v, rm[v], c[i][v]);
    }
  }
}

// micro_pairs<nv, mr> for nv in [1, kPairNV], mr in [1, kPairMR] (compile-time panel width and token count), as
// impl::micro_f32_n.
template <int NV = kPairNV, int MR = kPairMR>
inline void micro_pairs_n(int nv, int mr, const uint32_t* panel, const bf16_t* x, size_t ldx, int kc, float* y,
                          size_t ldy, const __mmask16* rm, bool accumulate) {
  if constexpr (NV > 1)
    if (nv < NV) return micro_pairs_n<NV - 1, MR>(nv, mr, panel, x, ldx, kc, y, ldy, rm, accumulate);
  if constexpr (MR > 1)
    if (mr < MR) return micro_pairs_n<NV, MR - 1>(nv, mr, panel, x, ldx, kc, y, ldy, rm, accumulate);
  micro_pairs<NV, MR>(panel, x, ldx, kc, y, ldy, rm, accumulate);
}

// Stack use: 24 KiB packed panel.
inline void matmul_pairs(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int M,
                         int rows, int cols) {
  alignas(64) uint32_t panel[(kPairKC / 2) * kPairNR];
  impl::walk_panels<kPairNV, kPairKC, kPairMC, kPairMR>(
      w, ld, y, ldy, M, rows, cols,
      [&](int r0, int k0, int nr, int nv, int kc) { pack_pairs(w + size_t(r0) * ld + k0, ld, nr, nv, kc, panel); },
      [&](int nv, int mr, int i, int k0, int kc, float* yt, const __mmask16* rm) {
        micro_pairs_n(nv, mr, panel, x + size_t(i) * ldx + k0, ldx, kc, yt, ldy, rm, k0 > 0);
      });
}

// The fast product of at most kMaxDotTokens tokens (decode, batched decode, short chunks) of the amx level, and of
// the avx512bf16 level when MI_TUNE_BF16_DECODE = 1 (avx512bf16.cpp): VDPBF16PS in dot form, the weights streamed
// once for all tokens, every token's row equal to its lone dot_rows<DpBf16, 1> bitwise.
// Measured against weights pre-packed in this file's pair layout (panels of 16 NV rows stored contiguously, one
// stream per thread, broadcast token pairs, no horizontal sums; harness, AMD Zen 5, 2 threads, 28 layers of the 0.6B
// matrices, medians, alternated): 1 token 12.65 ms dot form vs 13.3-14.0 packed (NV = 4), 8 tokens 18.75 vs 20.2
// (NV = 3, 2 KiB L1 prefetch; 24.6 without). Same loads per VDPBF16PS, fewer streams: no reason to repack for decode.
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
