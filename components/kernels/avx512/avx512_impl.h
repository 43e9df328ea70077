// AVX-512 (F/BW/VL/DQ) building blocks shared by the avx512 and avx512bf16 levels: loads with bf16 widening,
// a vector exp, dot-form (decode) and register-blocked (prefill) matrix kernels, element-wise ops.
//
// Include this header only from a translation unit compiled with the avx512 flags (cmake/KernelLevels.cmake).
// Everything here has internal linkage (anonymous namespace) on purpose: the same inline functions compiled in
// two TUs with different ISA flags must never be merged by the linker (an ODR merge could hand AVX-512-BF16 code
// to a caller on a plain AVX-512 machine). A generated engine for avx512bf16 must therefore copy this header too.
//
// Intrinsics semantics: Intel Intrinsics Guide / Intel SDM vol. 2 (VFMADD231PS, VPMOVZXWD, VMOVDQU16 with
// zero-masking: masked-off lanes are neither read nor faulted on, which is what makes the tail loads safe).
#pragma once
// GCC 12 reports -Wuninitialized inside its own AVX-512 headers (the _mm512_undefined_* idiom, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/bf16.h"
#include "kernels/kernel_api.h"
#include "kernels/kernel_scratch.h"
#include "kernels/row_streams.h"

namespace mi::kernels {
namespace {
namespace avx512_impl {

using std::size_t;

// ---- loads ------------------------------------------------------------------------------------------------
// bf16 -> f32 is exact: the bf16 bits are the upper half of the f32 (zero-extend 16->32, shift left 16).
inline __m512 widen_bf16(__m256i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)); }

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const bf16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const bf16_t* p, __mmask16 m) { return widen_bf16(_mm256_maskz_loadu_epi16(m, p)); }
// int8 -> f32 is exact: sign-extend to 32 bits (VPMOVSXBD), convert (VCVTDQ2PS). Masked-off bytes are not read.
inline __m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 load16(const int8_t* p, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

// Lanes [0, n) set, n clamped to [0, 16].
inline __mmask16 mask16(int n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}
inline __mmask32 mask32(int n) {
  return n >= 32 ? __mmask32(0xFFFFFFFFu) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1u);
}

// ---- exp --------------------------------------------------------------------------------------------------
// exp(x) per lane. Range reduction (Cody & Waite): x = n*ln2 + r with n = round(x*log2(e)), |r| <= ln2/2, the
// product n*ln2 taken in two parts through FMA (ln2_hi = ln2 rounded to 12 significant bits, so n*ln2_hi is exact
// for |n| <= 150; ln2_lo = ln2 - ln2_hi). e^r is the degree-7
// Taylor polynomial: truncation error <= (ln2/2)^8/8! * e^r < 5.2e-9 relative (0.05 ulp). 2^n is applied as two
// exact power-of-two factors 2^(n>>1) * 2^(n-(n>>1)), so results in the subnormal range are rounded only once and
// overflow gives +inf. Measured against the correctly rounded exp (double std::exp rounded to float) over every
// 16th float in [-104, 89] (1.4e8 inputs, subnormal results included): max error 1 ulp
// (tests/unit/kernels check silu_mul, which is exp element-wise, within 4 ulp of the std::exp scalar level).
// Input clamped to [-104, 89] (exp(-104) rounds to 0, exp(89) overflows); NaN propagates (MAXPS/MINPS return the
// second operand when either is NaN, and the constant is the first).
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln2_hi: 12 significant bits
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);  // ln2_lo = ln2 - ln2_hi
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);  // in [-150, 129]
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

// ---- horizontal sums -----------------------------------------------------------------------------------------
// The sum of a vector's 16 lanes as a fixed tree: lane i + lane i+8 (i < 8), then i + i+4 (i < 4), then i + i+2
// (i < 2), then lane 0 + lane 1 - the pairing of GCC 12's _mm512_reduce_add_ps (avx512fintrin.h), so results are
// unchanged under GCC. Written out because Clang's intrinsic is a reassociable reduction with no promised order:
// this way the one-vector form (hsum) and the many-vector form (hsum_many) give every vector the same result
// bitwise on any compiler (float addition is commutative, so only the pairing matters).
inline float hsum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// out[i] = hsum(v[i]) for i < N <= 16, 16 vectors at a time as a transposing tree: each stage adds the same lane
// pairs as hsum for two vectors' worth of lanes in one instruction, so 16 sums cost 30 shuffles and 15 adds
// instead of 16 x (3 extracts or shuffles + 4 adds + 1 store). Missing vectors (i >= N) are zeros.
template <int N>
inline void hsum_many(const __m512* v, float* out) {
  static_assert(N >= 1 && N <= 16);
  const auto in = [&](int i) { return i < N ? v[i] : _mm512_setzero_ps(); };
  __m512 s1[8], s2[4], s3[2];
  // 128-bit lanes 0,1 of each vector + lanes 2,3 (i + i+8): s1[k] = 8 partials of v[2k], then 8 of v[2k+1].
  for (int k = 0; k < 8; ++k) {
    if (2 * k >= N) { s1[k] = _mm512_setzero_ps(); continue; }
    const __m512 a = in(2 * k), b = in(2 * k + 1);
    s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // (i + i+4): s2[k]'s 128-bit lane j = 4 partials of v[4k + j].
  for (int k = 0; k < 4; ++k) {
    if (4 * k >= N) { s2[k] = _mm512_setzero_ps(); continue; }
    s2[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(s1[2 * k], s1[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // (i + i+2): in 128-bit lane j of s3[k], elements 0,1 are v[8k + j]'s, 2,3 are v[8k + 4 + j]'s.
  for (int k = 0; k < 2; ++k) {
    if (8 * k >= N) { s3[k] = _mm512_setzero_ps(); continue; }
    s3[k] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // (0 + 1): element e of 128-bit lane j is the sum of v[j + 4e].
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, r);
  for (int i = 0; i < N; ++i) out[i] = lanes[4 * (i % 4) + i / 4];
}

// ---- decode: dot-form matrix kernels ------------------------------------------------------------------------
// R weight rows x T tokens per call, ONE accumulator per (row, token): acc = step(acc, w[c..), x[c..)) over the
// columns in order, Ops::kStep at a time, a masked step for the last columns, then one horizontal sum (hsum's tree;
// a block sums its R*T accumulators together through hsum_many, 18% more 8-token FLOP/s in L2 on Zen 4). That
// arithmetic is the contract of every dot form: it does not depend on R, T or which rows share a block, so a row of
// a batched decode step (T = 2..8 tokens, one per sequence) equals the lone matvec of that token bitwise, and a
// served request's greedy output does not depend on its batch. Every weight vector loaded is used for T tokens and
// every activation vector for R rows (R + T loads per R*T steps); the R*T independent chains hide the step latency
// (one row alone is memory-bound, and one accumulator per row keeps up with it).
// While a block of R rows is read, the same columns `ahead` elements on are prefetched, every cache line of every
// row: each row is a short stream (2 KiB for a 1024-column bf16 row) that the hardware prefetcher would only pick up
// after it started. Prefetches past the last row are harmless (PREFETCHh never faults). Into L2 or L1 as the tuning
// parameters MI_TUNE_DOT_PREFETCH (fewer than 4 tokens) and MI_TUNE_BATCH_PREFETCH (4 to 8) say (row_streams.h).
// Block row r is weight row w + r * row_step and output y[t * ldy + r * y_step]: adjacent rows (row_step = ld,
// ahead = R * ld: the next block) or far-apart row groups (row_streams.h).
//
// Ops is the step: FmaDot below (f32 FMA on widened weights, f32 activations) or bf16_dot_impl's VDPBF16PS form.
template <class WT>
struct FmaDot {
  using W = WT;
  using X = float;  // bf16 activations are widened first (interleave_tokens)
  using Wv = __m512;
  using Xv = __m512;
  using Mask = __mmask16;
  static constexpr int kStep = 16;
  static Mask mask(int n) { return mask16(n); }
  static Wv load_w(const W* p) { return load16(p); }
  static Wv load_w(const W* p, Mask m) { return load16(p, m); }
  static Xv load_x(const X* p) { return load16(p); }
  static Xv load_x(const X* p, Mask m) { return load16(p, m); }
  static __m512 step(__m512 acc, Wv w, Xv x) { return _mm512_fmadd_ps(w, x, acc); }
};

// The activations of T tokens interleaved by step: element (t, c) at x[c * T + t * kStep] for c a multiple of
// kStep (the step's lanes follow), so the T vectors of one step are adjacent and one pointer reaches them all.
// For T = 1 this is the plain row.
template <class Ops, int T>
inline const typename Ops::X* xi_at(const typename Ops::X* xi, int c, int t) {
  return xi + size_t(c) * T + size_t(t) * Ops::kStep;
}

// Columns [c_begin, c_end) of the block. c_begin > 0 continues the accumulators saved in `carry` ([T][R] vectors);
// c_end < cols saves them there instead of summing (c_end then a multiple of 2 * Ops::kStep), so a row split into
// column spans accumulates exactly as in one pass. xi: the tokens interleaved (xi_at).
template <class Ops, int R, int T>
inline void dot_block(const typename Ops::W* w, size_t row_step, std::ptrdiff_t ahead, const typename Ops::X* xi,
                      float* y, size_t ldy, size_t y_step, int cols, int c_begin, int c_end, __m512* carry) {
  constexpr int S = Ops::kStep;
  __m512 acc[T * R];  // (token t, row r) at t * R + r, as in carry; flat so hsum_many may read it as one array
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc[t * R + r] = c_begin > 0 ? carry[t * R + r] : _mm512_setzero_ps();
  int c = c_begin;
  for (; c + 2 * S <= c_end; c += 2 * S) {
    // Every line of the next 2 steps: 64 bytes per row for FMA's 16 bf16 columns per step, 128 for VDPBF16PS's 32
    // and for f32 weights (one prefetch per row per 2 steps covered only half of those lines).
    // int8 weights: 2 steps are half a line, so every other iteration (c_begin is 0 or a multiple of 512).
    constexpr int kLine = 64 / int(sizeof(typename Ops::W));
    if (kLine <= 2 * S || c % kLine == 0)
      for (int l = 0; l < 2 * S; l += kLine)
        for (int r = 0; r < R; ++r) prefetch_weights<T>(w + r * row_step + ahead + c + l);
    for (int h = 0; h < 2 * S; h += S) {
      typename Ops::Wv wv[R];
      for (int r = 0; r < R; ++r) wv[r] = Ops::load_w(w + r * row_step + c + h);
      for (int t = 0; t < T; ++t) {
        typename Ops::Xv xv = Ops::load_x(xi_at<Ops, T>(xi, c + h, t));
        // Keep the activation in a register for its R uses: GCC would otherwise fold the load into each FMA, R loads
        // instead of one (Zen 5, 3 rows x 8 tokens: 99 -> 115-142 GFLOP/s on one core).
        if constexpr (R > 1) __asm__("" : "+v"(xv));
        for (int r = 0; r < R; ++r) acc[t * R + r] = Ops::step(acc[t * R + r], wv[r], xv);
      }
    }
  }
  for (; c < c_end; c += S) {  // the row's last columns: at most two steps, the last one masked
    const typename Ops::Mask m = Ops::mask(cols - c);
    typename Ops::Wv wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Ops::load_w(w + r * row_step + c, m);
    for (int t = 0; t < T; ++t) {
      const typename Ops::Xv xv = Ops::load_x(xi_at<Ops, T>(xi, c, t), m);
      for (int r = 0; r < R; ++r) acc[t * R + r] = Ops::step(acc[t * R + r], wv[r], xv);
    }
  }
  assert(carry != nullptr || c_end == cols);  // a caller stopping before the row's end must keep the sums
  if (c_end < cols && carry != nullptr) {  // (callers walking whole rows pass no carry)
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) carry[t * R + r] = acc[t * R + r];
    return;
  }
  if constexpr (R * T >= 4) {  // the accumulators in [T][R] order, 16 at a time, each summed as hsum would
    constexpr int n = R * T;
    static_assert(n <= 32, "two hsum_many groups");
    alignas(64) float sums[n];
    hsum_many<(n < 16 ? n : 16)>(acc, sums);
    if constexpr (n > 16) hsum_many<(n > 16 ? n - 16 : 1)>(acc + 16, sums + 16);
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) y[t * ldy + r * y_step] = sums[t * R + r];
  } else {
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) y[t * ldy + r * y_step] = hsum(acc[t * R + r]);
  }
}

// Rows per block for T tokens: as many as keep R*T accumulators, R weight vectors and one activation within the
// 32 zmm registers while every load feeds several FMAs (R + T loads per R*T FMAs). The one-token block is a tuning
// parameter (ckb/platforms: [[tuning]] MI_TUNE_MATVEC_ROWS, set by the engine's build from its constraints'
// [tuning]; `metainfer generate --tune` times the choices); blocks of up to kStreamTokens tokens read R far-apart
// row streams (MI_TUNE_ROW_STREAMS below).
#ifndef MI_TUNE_MATVEC_ROWS
#define MI_TUNE_MATVEC_ROWS 4
#endif
static_assert(MI_TUNE_MATVEC_ROWS >= 1 && MI_TUNE_MATVEC_ROWS <= 8, "MI_TUNE_MATVEC_ROWS: 1..8");
template <int T>
constexpr int kDotRows = T == 1 ? MI_TUNE_MATVEC_ROWS : T <= 3 ? 4 : T == 4 ? 5 : T <= 6 ? 4 : 3;

// Up to this many tokens a block is memory-bound and reads its rows as far-apart streams (below). Zen 5, 2 threads,
// 48 distinct 3072 x 1024 matrices: 2 tokens 5.3 ms as 4 streams against 7.6-8.1 ms as 8 adjacent rows (one token
// 5.1-5.7 ms), 3 tokens 5.7 against 7.9; at 4 and 6 tokens streams gave nothing (6.9-7.1 and 8.2-8.6 ms either way).
constexpr int kStreamTokens = 3;

// Which rows a block of up to kStreamTokens tokens reads (ckb/platforms: [[tuning]] MI_TUNE_ROW_STREAMS):
// 1 (default), R rows from R far-apart row groups (row_streams.h), each stream prefetched kStreamPrefetchBytes on;
// 0, R adjacent rows with the next block prefetched. Measured on AMD Zen 5 (EPYC "Turin", 2 threads, 48 distinct
// 3072 x 1024 bf16 matrices streamed, f32 activations; the read probe's best pattern gave 72-75 GB/s): 4 streams
// with 2 KiB prefetch 69-72 GB/s (1 thread 36-38), 4 streams with 4 KiB 58-65, without prefetch 64-67, 8 streams
// 48-57, 8 adjacent rows (the earlier default, chosen on a Xeon) 49-52 (1 thread 25.5). Experience OPT-014.
#ifndef MI_TUNE_ROW_STREAMS
#define MI_TUNE_ROW_STREAMS 1
#endif
static_assert(MI_TUNE_ROW_STREAMS == 0 || MI_TUNE_ROW_STREAMS == 1, "MI_TUNE_ROW_STREAMS: 0 or 1");

// Y[t, r] for t < T over all rows; xi: the T tokens interleaved (xi_at).
template <class Ops, int T>
inline void dot_rows(const typename Ops::W* w, size_t ld, const typename Ops::X* xi, float* y, size_t ldy, int rows,
                     int cols) {
  constexpr int R = kDotRows<T>;
  if constexpr (T <= kStreamTokens && MI_TUNE_ROW_STREAMS == 1) {
    constexpr size_t ahead = kStreamPrefetchBytes / sizeof(typename Ops::W);
    for_row_streams<R>(
        rows,
        [&](int i, int n) {
          dot_block<Ops, R, T>(w + size_t(i) * ld, size_t(n) * ld, ahead, xi, y + i, ldy, size_t(n), cols, 0, cols,
                               nullptr);
        },
        [&](int r) { dot_block<Ops, 1, T>(w + size_t(r) * ld, ld, ld, xi, y + r, ldy, 1, cols, 0, cols, nullptr); });
    return;
  }
  // Blocks of R adjacent rows, what comes next prefetched. When the T tokens' activations exceed kWholeRowBytes, they
  // are walked in column spans of kSpan that a panel of kDotPanel blocks reads while they sit in L1 or L2; across spans
  // each block's accumulators wait in `carry` (dot_block), so the sums are the same whatever the span. Measured on one
  // Zen 5 core, 8 tokens, 3 x 8 accumulators: 1024 x 3072 with 512-column spans 97-113 GFLOP/s, without 87-90;
  // 3072 x 1024 in one span 143-147, in 512-column spans 110-115; 256-column spans 89-96 on both. On AMD Zen 4 (2
  // threads, 28 distinct matrices streamed, medians of 9 alternated rounds) 1024-column spans beat 512 wherever rows
  // are split: 1024 x 3072 fast (VDPBF16PS) T = 6 8.56 -> 7.05 ms, T = 8 10.09 -> 8.17; precise (FMA, f32 tokens)
  // T = 4 8.21 -> 6.80, T = 8 12.50 -> 11.14; 1024 x 2048 precise T = 6/8 7.07/7.68 -> 5.94/6.46; unsplit shapes
  // unchanged (experience OPT-021). bf16 activations (fast numerics) span from 16 KiB (32 KiB before) in panels of 16
  // blocks (8): o_proj's 8 tokens x 2048 columns (32 KiB) filled two thirds of Zen 5's 48 KiB L1 beside the weight
  // lines streaming through it, and a 16 KiB span with 16 blocks' carried accumulators (24 KiB at 3 x 8) still fits.
  // f32 activations (precise, int8) keep 32 KiB and 8 blocks (32 KiB spans + 12 KiB of carry); the new rule was not
  // measured there.
  // AMD Zen 5, fast, 8 tokens, engines alternated (`ENGINE bench --parts batch,profile --batch 1,8 --batch-gen 64`):
  // o_proj at B = 8 faster than with the old rule in 8 of 9 rounds (2.80-3.79 ms against 3.07-4.07), the B = 8 step
  // faster in 5 of 9; with the 16 KiB spans but 8 blocks, o_proj faster in 4 of 6 (experience OPT-036).
  constexpr bool kBf16Tokens = sizeof(typename Ops::X) == 2;
  constexpr int kSpan = 1024, kDotPanel = kBf16Tokens ? 16 : 8;
  constexpr size_t kWholeRowBytes = kBf16Tokens ? 16384 : 32768;
  const int span = size_t(T) * size_t(cols) * sizeof(typename Ops::X) <= kWholeRowBytes ? cols : kSpan;
  static_assert(kSpan % (2 * Ops::kStep) == 0, "a span ends on a full step");
  alignas(64) __m512 carry[kDotPanel][T * R];
  int r = 0;
  for (; r + R <= rows; r += kDotPanel * R) {
    const int blocks = (rows - r) / R < kDotPanel ? (rows - r) / R : kDotPanel;
    for (int c0 = 0; c0 < cols; c0 += span) {
      const int c1 = cols - c0 <= span ? cols : c0 + span;
      for (int b = 0; b < blocks; ++b) {
        // Prefetch what comes next: the next block's span, or after the panel's last block the first block's next
        // span, or after the last span the next panel's first span.
        const std::ptrdiff_t ahead = b + 1 < blocks ? std::ptrdiff_t(R) * std::ptrdiff_t(ld)
                                     : c1 < cols    ? -std::ptrdiff_t(b) * R * std::ptrdiff_t(ld) + (c1 - c0)
                                                    : std::ptrdiff_t(R) * std::ptrdiff_t(ld) - c0;
        dot_block<Ops, R, T>(w + size_t(r + b * R) * ld, ld, ahead, xi, y + r + b * R, ldy, 1, cols, c0, c1,
                             carry[b]);
      }
    }
    if (blocks < kDotPanel) {
      r += blocks * R;
      break;
    }
  }
  for (; r < rows; ++r) dot_block<Ops, 1, T>(w + size_t(r) * ld, ld, ld, xi, y + r, ldy, 1, cols, 0, cols, nullptr);
}

// The T tokens of X (row stride ldx) interleaved by step as dot_block reads them (xi_at), converted to Ops::X:
// f32 stays f32, bf16 becomes f32 for FmaDot (exact: the products are the same as widening at every load) or stays
// bf16 for a bf16 step. One plain f32 or bf16 row is already in that layout and is used in place. The buffer is
// the thread's scratch (kernel_scratch.h); lanes past `cols` are zero (the kernels mask them anyway).
template <class Ops, class X>
inline const typename Ops::X* interleave_tokens(const X* x, size_t ldx, int T, int cols) {
  using XO = typename Ops::X;
  constexpr int S = Ops::kStep;
  if constexpr (std::is_same_v<X, XO>)
    if (T == 1) return x;
  // 64-byte aligned (thread_scratch): a 64-byte vector load across two cache lines costs two (measured: half the
  // FMA rate).
  const size_t steps = (size_t(cols) + S - 1) / S;
  XO* out = static_cast<XO*>(thread_scratch(steps * S * size_t(T) * sizeof(XO)));
  for (size_t k = 0; k < steps; ++k)
    for (int t = 0; t < T; ++t) {
      const X* src = x + size_t(t) * ldx + k * S;
      XO* dst = out + (k * T + t) * S;
      const int n = cols - int(k * S) < S ? cols - int(k * S) : S;
      if constexpr (std::is_same_v<X, XO>) {
        if (n == S) {  // a constant size: two vector moves, not a library call per step
          std::memcpy(dst, src, sizeof(XO) * S);
        } else {
          std::memcpy(dst, src, sizeof(XO) * size_t(n));
          std::memset(static_cast<void*>(dst + n), 0, sizeof(XO) * size_t(S - n));
        }
      } else {  // bf16 -> f32 (S = 16)
        static_assert(std::is_same_v<X, bf16_t> && std::is_same_v<XO, float> && S == 16);
        _mm512_storeu_ps(dst, load16(src, mask16(n)));
      }
    }
  return out;
}

// Y[t, r] for M in [1, kMaxDotTokens] tokens in one pass over the weights (M as a compile-time constant).
constexpr int kMaxDotTokens = 8;
template <class Ops, class X>
inline void dot_rows_tokens(const typename Ops::W* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M,
                            int rows, int cols) {
  const typename Ops::X* xi = interleave_tokens<Ops>(x, ldx, M, cols);
  switch (M) {
#define MI_FEW_CASE(n) \
  case n: return dot_rows<Ops, n>(w, ld, xi, y, ldy, rows, cols);
    MI_FEW_CASE(1) MI_FEW_CASE(2) MI_FEW_CASE(3) MI_FEW_CASE(4)
    MI_FEW_CASE(5) MI_FEW_CASE(6) MI_FEW_CASE(7) MI_FEW_CASE(8)
#undef MI_FEW_CASE
    default: break;
  }
  static_assert(kMaxDotTokens == 8, "dot_rows_tokens covers 1..kMaxDotTokens");
}

template <class W, class X>
inline void matvec(const W* w, size_t ld, const X* x, float* y, int rows, int cols) {
  dot_rows_tokens<FmaDot<W>>(w, ld, x, 0, y, 0, 1, rows, cols);
}

// Batched decode: one token per sequence, B = 2..8 tokens, too few to pay for packing panels (measured on the 0.6B
// shape, 2 threads: B = 8 took 2x the step time of B = 1 through the packed kernel), so they take the dot forms,
// whose rows equal the lone matvec's bitwise.
template <class W, class X>
inline void matmul_few_tokens(const W* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M, int rows,
                              int cols) {
  dot_rows_tokens<FmaDot<W>>(w, ld, x, ldx, y, ldy, M, rows, cols);
}

// ---- prefill: register-blocked matrix kernel ----------------------------------------------------------------
// Outer-product form (as in BLIS, Van Zee & van de Geijn 2015): a panel of up to kNR = 48 weight rows x kKC columns
// is packed once (widened to f32, transposed to [kKC][16 nv]) and then used by every token of the current block of
// up to kMC tokens, kMR = 8 tokens at a time, each with 3 x 8 accumulators in registers. Per packed column k the
// micro-kernel does 3 vector loads of weights, 8 broadcasts of x and 24 FMAs, so it is FMA-bound; weights are read
// from memory once per block of kMC tokens (a prompt of up to kMC tokens packs each panel once), and the next panel's
// source lines are prefetched into L2 while the current one is used (NextPanel). A panel's last rows take 1 or 2
// vectors. Measured on AMD Zen 4 (2 threads, 16 distinct matrices streamed, medians; experience OPT-025), the same
// sums as the earlier 32-row x 12-token kernel in blocks of 192 tokens, bitwise, at 1.10-1.43x its rate: 185-202
// GFLOP/s (83-91% of the f32 FMA peak) on 3072 x 1024, 1024 x 3072, 2048 x 1024 at 256 tokens and 1024 x 2048 at 1021.
constexpr int kNV = 3;          // panel vectors of 16 rows
constexpr int kNR = 16 * kNV;   // rows per panel
constexpr int kMR = 8;          // tokens per micro-kernel call
constexpr int kKC = 256;        // even: the bf16 pair packing of the avx512bf16 level needs pair-aligned blocks
// Tokens per block: 1024, so a prompt of up to 1024 tokens packs (and reads from memory) each panel once. What a block
// keeps near the core: the panel (bf16 pairs 24 KiB: L1; f32 48 KiB: L2), one KC slice of its activations (1024 x 256
// bf16 = 512 KiB for the packed-pairs kernel: L2; f32 1 MiB here: L3 on a 1 MiB L2) and the panel's output tile (1024 x
// 48 f32 = 192 KiB), which the micro-kernel's broadcasts and accumulating stores tolerate. Measured on AMD Zen 5 (EPYC
// "Turin", 2 threads, 1 MiB L2 per core, the 0.6B shapes' four linears over 4-8 layers of distinct matrices through
// linear(), medians of 3-5, two alternated rounds; harness like bench/kernels): 256 -> 1024 tokens, fast (packed pairs)
// 1021 tokens 558-582 -> 613-620 GFLOP/s, 512 tokens 528-537 -> 557-577, 2048 tokens 596-612 -> 596-616; precise (this
// kernel, f32 tokens) 1021 tokens 360-365 -> 387, 512 tokens 344-359 -> 367-370, 2048 tokens 367-368 -> 383-384;
// 2048-token blocks were slower than 1024 (fast, 2048 tokens: 553-561). Not measured: Zen 4, Intel, and the int8
// prefill and AMX f32-weight paths that use this kernel too. Experience OPT-030. The block size does not change a sum:
// every output adds its KC blocks in column order whatever block its token is in.
constexpr int kMC = 1024;

// In-register transpose of a 16x16 block of 32-bit elements: t[i] lane j  ->  t[j] lane i. Always inlined: GCC kept
// it out of line in the attention kernels (perf), which put the 16 vectors through the stack on every call.
__attribute__((always_inline)) inline void transpose16x16(__m512 t[16]) {
  __m512 u[16];
  for (int q = 0; q < 4; ++q) {  // 4x4 transposes inside each 128-bit block, rows 4q..4q+3
    const __m512 a0 = _mm512_unpacklo_ps(t[4 * q + 0], t[4 * q + 1]);
    const __m512 a1 = _mm512_unpackhi_ps(t[4 * q + 0], t[4 * q + 1]);
    const __m512 a2 = _mm512_unpacklo_ps(t[4 * q + 2], t[4 * q + 3]);
    const __m512 a3 = _mm512_unpackhi_ps(t[4 * q + 2], t[4 * q + 3]);
    u[4 * q + 0] = _mm512_shuffle_ps(a0, a2, 0x44);
    u[4 * q + 1] = _mm512_shuffle_ps(a0, a2, 0xEE);
    u[4 * q + 2] = _mm512_shuffle_ps(a1, a3, 0x44);
    u[4 * q + 3] = _mm512_shuffle_ps(a1, a3, 0xEE);
  }
  // u[4q+j], 128-bit block b = rows 4q..4q+3 of column 4b+j; now transpose the 4x4 grid of 128-bit blocks.
  for (int j = 0; j < 4; ++j) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
    const __m512 s1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    t[0 + j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    t[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

// A whole panel - exactly 16 NV rows by CHUNKS 16-lane column chunks, counts known at compile time, so no masks,
// no zero rows and unrolled loops - transposed 16 x 16 at a time: chunk(row, c) is the row's c-th 16-lane vector,
// and lane j of the transposed vector c of row group g goes to dst[(16 c + j) * 16 NV + 16 g + lane]. pack_panel
// (f32 lanes, chunks of 16 columns) and bf16_dot_impl.h pack_pairs (bf16 column pairs as 32-bit lanes, chunks of 32
// columns) send every panel of 16, 32 or 48 rows by a whole column block here (dispatch_whole_panel): all panels but
// a matrix's last rows (when those are not a multiple of 16) and last columns (when not a multiple of the block).
// Their general forms take run-time counts; packing is data movement only, so every result is bitwise the same.
// Why: at 16 tokens the prefill walks spent about a third (fast) to two fifths (precise) of their time, at 256 tokens
// 5-10 %, in the general pack and in a per-line division of NextPanel below; measurements in experience OPT-038.
// dst must be 64-byte aligned (the panels are alignas(64) and every store offset is a multiple of 16 lanes).
template <int NV, int CHUNKS, class Chunk>
inline void pack_whole_panel(Chunk&& chunk, void* dst) {
  auto* out = static_cast<float*>(dst);  // 32-bit lanes: f32 values or bf16 pairs, stored as they are
  constexpr size_t kStride = size_t(16 * NV);
  for (int g = 0; g < NV; ++g)
    for (int c = 0; c < CHUNKS; ++c) {
      __m512 t[16];
      for (int i = 0; i < 16; ++i) t[i] = chunk(16 * g + i, c);
      transpose16x16(t);
      for (int j = 0; j < 16; ++j) _mm512_store_si512(out + size_t(16 * c + j) * kStride + 16 * g, _mm512_castps_si512(t[j]));
    }
}

// Calls whole(Nv constant) when nr == 16 nv and kc == KC, for nv in [1, NV]; returns whether it did.
template <int NV, int KC, class Whole>
inline bool dispatch_whole_panel(int nr, int nv, int kc, Whole&& whole) {
  if (kc != KC || nr != 16 * nv) return false;
  if constexpr (NV > 1)
    if (nv < NV) return dispatch_whole_panel<NV - 1, KC>(nr, nv, kc, whole);
  if (nv != NV) return false;
  whole(std::integral_constant<int, NV>{});
  return true;
}

// dst[k * 16 nv + r] = W[r, k] as f32 for r < nr <= 16 nv, k < kc; rows nr..16 nv - 1 are zero.
template <class W>
inline void pack_panel(const W* w, size_t ld, int nr, int nv, int kc, float* dst) {
  static_assert(kKC % 16 == 0, "whole 16-column chunks");
  const auto whole = [&](auto n) {
    pack_whole_panel<decltype(n)::value, kKC / 16>([&](int r, int c) { return load16(w + size_t(r) * ld + 16 * c); }, dst);
  };
  if (dispatch_whole_panel<kNV, kKC>(nr, nv, kc, whole)) return;
  const size_t stride = size_t(16 * nv);
  for (int g = 0; g < nv; ++g) {
    const int r0 = 16 * g;
    for (int k = 0; k < kc; k += 16) {
      const __mmask16 km = mask16(kc - k);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] = r0 + i < nr ? load16(w + size_t(r0 + i) * ld + k, km) : _mm512_setzero_ps();
      transpose16x16(t);
      const int kn = kc - k < 16 ? kc - k : 16;
      for (int j = 0; j < kn; ++j) _mm512_store_ps(dst + size_t(k + j) * stride + r0, t[j]);
    }
  }
}

// The source lines of the panel that follows (r0, k0) in a (row panel, column block) walk - the next column block
// of the same rows, else the first of the next rows - prefetched into L2 a share per micro-kernel call, so packing
// it reads cache instead of waiting on memory row by row. Nothing when (r0, k0) is the last panel.
template <class W>
struct NextPanel {
  const W* w;
  size_t ld;
  int r0 = 0, k0 = 0, row_lines = 1, lines = 0, calls = 1;
  NextPanel(const W* w_, size_t ld_, int rows, int cols, int nr_max, int kc_max, int r, int k, int micro_calls)
      : w(w_), ld(ld_), calls(micro_calls > 0 ? micro_calls : 1) {
    const bool same_rows = k + kc_max < cols;
    r0 = same_rows ? r : r + nr_max, k0 = same_rows ? k + kc_max : 0;
    const int next_rows = r0 < rows ? (rows - r0 < nr_max ? rows - r0 : nr_max) : 0;
    const int next_kc = cols - k0 < kc_max ? cols - k0 : kc_max;
    row_lines = (next_kc * int(sizeof(W)) + 63) / 64;
    lines = next_rows * row_lines;
  }
  void prefetch_share(int call) const {
    const int begin = lines * call / calls, end = lines * (call + 1) / calls;
    // Line l is line l % row_lines of row l / row_lines: one division by the run-time row_lines per call, then the
    // walk steps through the rows (a division per line cost the 16-token prefill measurably, OPT-038).
    int row = begin / row_lines, line = begin % row_lines;
    for (int l = begin; l < end; ++l) {
      if (line == row_lines) {
        line = 0;
        ++row;
      }
      _mm_prefetch(reinterpret_cast<const char*>(w + size_t(r0 + row) * ld + k0) + 64 * line, _MM_HINT_T1);
      ++line;
    }
  }
};

// Y[i, 0..nr) (+)= sum_k x[i, k] * panel[k, :] for i < MR; the panel is NV vectors wide. x is f32 with row stride
// ldx.
template <int NV, int MR>
inline void micro_f32(const float* panel, const float* x, size_t ldx, int kc, float* y, size_t ldy,
                      const __mmask16* rm, bool accumulate) {
  __m512 c[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) c[i][v] = _mm512_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    __m512 w[NV];
    for (int v = 0; v < NV; ++v) w[v] = _mm512_load_ps(panel + size_t(k) * 16 * NV + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
      for (int v = 0; v < NV; ++v) c[i][v] = _mm512_fmadd_ps(w[v], xb, c[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    for (int v = 0; v < NV; ++v) {
      if (accumulate) c[i][v] = _mm512_add_ps(c[i][v], _mm512_maskz_loadu_ps(rm[v], yi + 16 * v));
      _mm512_mask_storeu_ps(yi + 16 * v, rm[v], c[i][v]);
    }
  }
}

// micro_f32<nv, mr> for nv in [1, kNV], mr in [1, kMR] (compile-time panel width and token count).
template <int NV = kNV, int MR = kMR>
inline void micro_f32_n(int nv, int mr, const float* panel, const float* x, size_t ldx, int kc, float* y, size_t ldy,
                        const __mmask16* rm, bool accumulate) {
  if constexpr (NV > 1)
    if (nv < NV) return micro_f32_n<NV - 1, MR>(nv, mr, panel, x, ldx, kc, y, ldy, rm, accumulate);
  if constexpr (MR > 1)
    if (mr < MR) return micro_f32_n<NV, MR - 1>(nv, mr, panel, x, ldx, kc, y, ldy, rm, accumulate);
  micro_f32<NV, MR>(panel, x, ldx, kc, y, ldy, rm, accumulate);
}

// Rows of X as f32 for the micro-kernel: f32 X is used in place; bf16 X is widened into `buf` ([kMR][kKC]).
inline const float* x_as_f32(const float* x, size_t ldx, int, int, float*, size_t& ld_out) {
  ld_out = ldx;
  return x;
}
inline const float* x_as_f32(const bf16_t* x, size_t ldx, int mr, int kc, float* buf, size_t& ld_out) {
  for (int i = 0; i < mr; ++i)
    for (int k = 0; k < kc; k += 16) {
      const __mmask16 m = mask16(kc - k);
      _mm512_mask_storeu_ps(buf + size_t(i) * kKC + k, m, load16(x + i * ldx + k, m));
    }
  ld_out = kKC;
  return buf;
}

// Zero-column products: Y = 0.
inline void zero_outputs(float* y, size_t ldy, int M, int rows) {
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < rows; ++r) y[size_t(m) * ldy + r] = 0.0f;
}

// The loop nest of the outer-product prefill kernels (this one and bf16_dot_impl's packed pairs): blocks of MC
// tokens, panels of up to NV x 16 rows by KC columns, MR tokens per micro-kernel call, the next panel's source
// prefetched a share per call. pack(r0, k0, nr, nv, kc) packs a panel; micro(nv, mr, i, k0, kc, y_tile, rm) runs one
// micro-kernel on tokens [i, i + mr) with y_tile = y + i * ldy + r0, accumulating when k0 > 0.
template <int NV, int KC, int MC, int MR, class W, class Pack, class Micro>
inline void walk_panels(const W* w, size_t ld, float* y, size_t ldy, int M, int rows, int cols, Pack&& pack,
                        Micro&& micro) {
  constexpr int NR = 16 * NV;
  for (int m0 = 0; m0 < M; m0 += MC) {
    const int mc = M - m0 < MC ? M - m0 : MC;
    for (int r0 = 0; r0 < rows; r0 += NR) {
      const int nr = rows - r0 < NR ? rows - r0 : NR;
      const int nv = (nr + 15) / 16;
      __mmask16 rm[NV];
      for (int v = 0; v < NV; ++v) rm[v] = mask16(nr - 16 * v);
      for (int k0 = 0; k0 < cols; k0 += KC) {
        const int kc = cols - k0 < KC ? cols - k0 : KC;
        pack(r0, k0, nr, nv, kc);
        const NextPanel<W> next(w, ld, rows, cols, NR, KC, r0, k0, (mc + MR - 1) / MR);
        for (int i0 = 0, call = 0; i0 < mc; i0 += MR, ++call) {
          next.prefetch_share(call);
          const int mr = mc - i0 < MR ? mc - i0 : MR;
          micro(nv, mr, m0 + i0, k0, kc, y + size_t(m0 + i0) * ldy + r0, static_cast<const __mmask16*>(rm));
        }
      }
    }
  }
}

// Stack use: 48 KiB packed panel + 8 KiB widened activations (bf16 X only).
template <class W, class X>
inline void matmul(const W* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M, int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return zero_outputs(y, ldy, M, rows);
  if (M <= kMaxDotTokens) return matmul_few_tokens(w, ld, x, ldx, y, ldy, M, rows, cols);
  alignas(64) float panel[kKC * kNR];
  alignas(64) float xbuf[kMR * kKC];
  walk_panels<kNV, kKC, kMC, kMR>(
      w, ld, y, ldy, M, rows, cols,
      [&](int r0, int k0, int nr, int nv, int kc) { pack_panel(w + size_t(r0) * ld + k0, ld, nr, nv, kc, panel); },
      [&](int nv, int mr, int i, int k0, int kc, float* yt, const __mmask16* rm) {
        size_t ldxf = 0;
        const float* xf = x_as_f32(x + size_t(i) * ldx + k0, ldx, mr, kc, xbuf, ldxf);
        micro_f32_n(nv, mr, panel, xf, ldxf, kc, yt, ldy, rm, k0 > 0);
      });
}

// ---- element-wise -----------------------------------------------------------------------------------------
// Round to nearest even exactly as mi::f32_to_bf16 (integer arithmetic, so subnormals are kept, unlike the
// VCVTNEPS2BF16 instruction which flushes them): bits + 0x7fff + lsb, NaN -> quiet NaN (upper half | 0x40).
inline __m256i round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 is_nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan));
}

inline void to_bf16(const float* x, bf16_t* y, int n) {
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    _mm256_mask_storeu_epi16(y + i, m, round_to_bf16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

inline float dot(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// Attention scores, 16 keys at a time: one accumulator per key over the head dimension, then a 16x16 transpose turns
// the 16 partial-sum vectors into one vector of 16 scores - one horizontal reduction per 16 keys instead of one per
// key. Head dims that are a multiple of 16 up to 256 (64, 128, 256 in practice) take a form whose chunk count is a
// compile-time constant, so the 16 accumulators and the query stay in registers: with a run-time count and masked
// loads the loop kept them on the stack and ran at a fifth of the FMA rate (AMD Zen 5, 16 keys x 128 dims in L1:
// 118 ns per call vs 21 ns). Both forms do the same operations in the same order: the scores are bitwise equal.
// Keys and values are f32 or bf16 (E; fast numerics' KV cache): load16 widens bf16 exactly, so a bf16 row gives the
// scores the f32 kernel gives for the widened row, bitwise.
// The K/V rows are prefetched kKvPrefetchBytes ahead, once per line where kv_line_start says (row_streams.h).

// The fixed form walks the 16 keys row by row (the query's C chunks held in registers), so the span is read in
// address order; each accumulator still sums its chunks in c order, so the scores equal the column walk's bitwise.
// AMD Zen 5, 2 threads, Qwen3-0.6B KV at 1024 positions, decode attention over 28 layers, 3 alternated rounds:
// 8.51-10.43 ms row by row vs 8.81-11.22 column by column.
template <int C, class E>
inline void scores16_fixed(const float* q, const E* k, size_t ldk, __m512 sv, float* s) {
  __m512 acc[16];
  __m512 qv[C];
  for (int c = 0; c < C; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
  for (int t = 0; t < 16; ++t) {
    acc[t] = _mm512_setzero_ps();
    for (int c = 0; c < C; ++c)
      if (kv_line_start<E>(16 * c, 16 * C)) prefetch_kv(k + size_t(t) * ldk + 16 * c);
    for (int c = 0; c < C; ++c) acc[t] = _mm512_fmadd_ps(qv[c], load16(k + size_t(t) * ldk + 16 * c), acc[t]);
  }
  transpose16x16(acc);  // acc[i] lane t = partial sum i of key t
  __m512 sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, acc[i]);
  _mm512_storeu_ps(s, _mm512_mul_ps(sum, sv));
}

template <class E>
inline void scores16_any(const float* q, const E* k, size_t ldk, int d, __m512 sv, float* s) {
  const int chunks = (d + 15) / 16;
  __m512 acc[16];
  for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c) {
    const __mmask16 m = mask16(d - 16 * c);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + 16 * c);
    if (kv_line_start<E>(16 * c, d))
      for (int t = 0; t < 16; ++t) prefetch_kv(k + size_t(t) * ldk + 16 * c);
    for (int t = 0; t < 16; ++t) acc[t] = _mm512_fmadd_ps(qv, load16(k + size_t(t) * ldk + 16 * c, m), acc[t]);
  }
  transpose16x16(acc);
  __m512 sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, acc[i]);
  _mm512_storeu_ps(s, _mm512_mul_ps(sum, sv));
}

template <class E>
inline void attention_scores(const float* q, const E* k, size_t ldk, int n, int d, float scale, float* s) {
  const __m512 sv = _mm512_set1_ps(scale);
  const int chunks = (d + 15) / 16;
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const E* kj = k + size_t(j) * ldk;
    switch (d) {
      case 64: scores16_fixed<4>(q, kj, ldk, sv, s + j); break;
      case 128: scores16_fixed<8>(q, kj, ldk, sv, s + j); break;
      case 256: scores16_fixed<16>(q, kj, ldk, sv, s + j); break;
      default: scores16_any(q, kj, ldk, d, sv, s + j); break;
    }
  }
  for (; j < n; ++j) {
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < chunks; ++c)
      if (kv_line_start<E>(16 * c, d)) prefetch_kv(k + size_t(j) * ldk + 16 * c);
    for (int c = 0; c < chunks; ++c) {
      const __mmask16 m = mask16(d - 16 * c);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + 16 * c), load16(k + size_t(j) * ldk + 16 * c, m), acc);
    }
    s[j] = hsum(acc) * scale;  // hsum's tree, written out: lanes_one_key reproduces it for the prepared form
  }
}

// out += sum_j p[j] v[j]: the output stays in registers (up to 8 vectors = 128 dims per pass) over all n keys.
// Passes of W full vectors (W a compile-time constant) keep the accumulators in registers; a pass with a partial
// vector uses masks (as attention_scores: the same FMAs in the same order either way). d: the row's head_dim (which
// chunks start a line, kv_line_start).
template <int W, class E>
inline void values_pass(const float* p, const E* v, size_t ldv, int n, int d, float* out) {
  __m512 acc[W];
  for (int c = 0; c < W; ++c) acc[c] = _mm512_loadu_ps(out + 16 * c);
  for (int j = 0; j < n; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const E* vj = v + size_t(j) * ldv;
    for (int c = 0; c < W; ++c)
      if (kv_line_start<E>(16 * c, d)) prefetch_kv(vj + 16 * c);
    for (int c = 0; c < W; ++c) acc[c] = _mm512_fmadd_ps(pj, load16(vj + 16 * c), acc[c]);
  }
  for (int c = 0; c < W; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

template <class E>
inline void values_pass_masked(const float* p, const E* v, size_t ldv, int n, int width, int d, float* out) {
  const int chunks = (width + 15) / 16;
  __m512 acc[8];
  __mmask16 m[8];
  for (int c = 0; c < 8; ++c) {
    m[c] = c < chunks ? mask16(width - 16 * c) : __mmask16(0);
    acc[c] = _mm512_maskz_loadu_ps(m[c], out + 16 * c);
  }
  for (int j = 0; j < n; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const E* vj = v + size_t(j) * ldv;
    for (int c = 0; c < chunks; ++c)
      if (kv_line_start<E>(16 * c, d)) prefetch_kv(vj + 16 * c);
    for (int c = 0; c < 8; ++c)
      if (c < chunks) acc[c] = _mm512_fmadd_ps(pj, load16(vj + 16 * c, m[c]), acc[c]);
  }
  for (int c = 0; c < chunks; ++c) _mm512_mask_storeu_ps(out + 16 * c, m[c], acc[c]);
}

template <class E>
inline void attention_values(const float* p, const E* v, size_t ldv, int n, int d, float* out) {
  for (int c0 = 0; c0 < d; c0 += 128) {
    const int width = d - c0 < 128 ? d - c0 : 128;
    const E* vc = v + c0;
    float* oc = out + c0;
    switch (width % 16 == 0 ? width / 16 : 0) {
      case 8: values_pass<8>(p, vc, ldv, n, d, oc); break;
      case 4: values_pass<4>(p, vc, ldv, n, d, oc); break;
      default: values_pass_masked(p, vc, ldv, n, width, d, oc); break;
    }
  }
}

// A prefill's query block (model/attention.h attend_block; also a decode step whose KV head has more than 16 query
// heads), prepared once and scored against every span: s[i][j] for j < n[i] equals attention_scores(q[i], k, ldk,
// n[i], d, scale, s[i]) bitwise. The queries are held in lanes, qt[c * 16 + i] = q[i][c], so for each key the 16
// queries' partial sums are 16 vectors P_l (l = the lane of the one-query kernel, sum over chunks c of
// q[16c + l] * k[16c + l] by FMA in c order) and the one-query kernel's reductions become vertical adds: a full
// 16-key block's P_0 + P_1 + ... + P_15 in that order (its transpose then lane-ordered adds), a tail key's hsum tree
// (l + l+8, l + l+4, l + l+2, 0 + 1). The kernel's 16x16 transpose per 16 (query, key) pairs (64 shuffles for 128
// FMAs at head_dim 128) becomes one per 16 keys x 16 queries, and the diagonal span's queries, which end inside it,
// no longer run alone. Measured on AMD Zen 4 (one core, 16 queries x 512 keys x 128 dims in L2): 83-86 -> 101-107
// GFLOP/s against the 4 x 4-tile form this replaces (experience OPT-027). Head dims that are not a multiple of 16
// (masked chunks) or above kAttentionPreparedMaxHeadDim keep the queries as rows and the one-query kernel.
// Each key row is read once per query block. No prefetch: not measured for this form (OPT-022: prefetching the next
// span whole did nothing measurable for the 4 x 4 tiles it replaces).
// lanes_full_block serves the groups every query sees whole (KT keys share each query vector load); lanes_one_key
// the diagonal's mixed groups, where one pass over a key gives both reductions and each lane picks its own.
inline bool queries_in_lanes(int d) { return d % 16 == 0 && d <= kAttentionPreparedMaxHeadDim; }

inline void attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  assert(nq <= kAttentionPreparedMaxQueries);
  if (!queries_in_lanes(d)) return prepare_query_rows(q, nq, d, buf);
  for (int c = 0; c < d; c += 16) {
    __m512 t[16];
    for (int i = 0; i < 16; ++i) t[i] = i < nq ? _mm512_loadu_ps(q[i] + c) : _mm512_setzero_ps();
    transpose16x16(t);  // t[j] lane i = q[i][c + j]
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(buf + size_t(c + j) * 16, t[j]);
  }
}

// S[t] lane i = the full-block sum of (query i, key t) for the 16 keys k[t * ldk], KT keys at a time: each query
// vector loaded feeds KT FMAs, each key element is a broadcast operand. C > 0: the chunk count as a compile-time
// constant (head dims 64, 128, 256), so the chunk loop unrolls; with KT = 8 every lane's 8 independent chains keep
// the FMA pipes busy. AMD Zen 5, one core, 16 queries x 512 or 1024 keys of 128 in L2, this function alone: KT = 4 with
// a run-time count 146-161 GFLOP/s, KT = 4 fixed 157-168, KT = 8 fixed 172-178 (167-174 through
// attention_scores_prepared; f32 FMA peak 232). Same sums in the same order. Head dims 64 and 256 take the same form
// unmeasured.
template <int KT, int C = 0>
inline void lanes_full_block(const float* qt, const float* k, size_t ldk, int run_time_chunks, __m512 S[16]) {
  const int chunks = C > 0 ? C : run_time_chunks;
  for (int t0 = 0; t0 < 16; t0 += KT) {
    __m512 sum[KT];
    for (int l = 0; l < 16; ++l) {
      __m512 a[KT];
      for (int t = 0; t < KT; ++t) a[t] = _mm512_setzero_ps();
      for (int c = 0; c < chunks; ++c) {
        const __m512 qv = _mm512_loadu_ps(qt + size_t(16 * c + l) * 16);
        for (int t = 0; t < KT; ++t)
          a[t] = _mm512_fmadd_ps(qv, _mm512_set1_ps(k[size_t(t0 + t) * ldk + 16 * c + l]), a[t]);
      }
      for (int t = 0; t < KT; ++t) sum[t] = l == 0 ? a[t] : _mm512_add_ps(sum[t], a[t]);
    }
    for (int t = 0; t < KT; ++t) S[t0 + t] = sum[t];
  }
}

// One key row against the queries in lanes, both reductions: full (lane order) and tail (the hsum tree).
inline void lanes_one_key(const float* qt, const float* key, int chunks, __m512& full, __m512& tail) {
  __m512 p[16];
  for (int l = 0; l < 16; ++l) p[l] = _mm512_setzero_ps();
  for (int c = 0; c < chunks; ++c)
    for (int l = 0; l < 16; ++l)
      p[l] = _mm512_fmadd_ps(_mm512_loadu_ps(qt + size_t(16 * c + l) * 16), _mm512_set1_ps(key[16 * c + l]), p[l]);
  full = p[0];
  for (int l = 1; l < 16; ++l) full = _mm512_add_ps(full, p[l]);
  for (int l = 0; l < 8; ++l) p[l] = _mm512_add_ps(p[l], p[l + 8]);
  for (int l = 0; l < 4; ++l) p[l] = _mm512_add_ps(p[l], p[l + 4]);
  for (int l = 0; l < 2; ++l) p[l] = _mm512_add_ps(p[l], p[l + 2]);
  tail = _mm512_add_ps(p[0], p[1]);
}

// Keys [j0, j0 + 16) of the span (f32 rows kg, stride ldg; only the first kcount read) for the queries in lanes.
inline void lanes_key_group(const float* qt, int nq, const float* kg, size_t ldg, int kcount, int j0, const int* n,
                            int d, __m512 sv, float* const* s) {
  __mmask16 tail_lanes = 0;
  for (int i = 0; i < nq; ++i)
    if (n[i] > j0 && n[i] < j0 + 16) tail_lanes = __mmask16(tail_lanes | (1u << i));
  __m512 S[16];
  if (tail_lanes == 0) {  // every query that reaches this group sees all 16 of its keys (so kcount == 16)
    assert(kcount == 16);
    switch (d) {
      case 64: lanes_full_block<8, 4>(qt, kg, ldg, 4, S); break;
      case 128: lanes_full_block<8, 8>(qt, kg, ldg, 8, S); break;
      case 256: lanes_full_block<8, 16>(qt, kg, ldg, 16, S); break;
      default: lanes_full_block<4>(qt, kg, ldg, d / 16, S); break;
    }
    for (int t = 0; t < 16; ++t) S[t] = _mm512_mul_ps(S[t], sv);
  } else {
    for (int t = 0; t < 16; ++t) {
      if (t >= kcount) { S[t] = _mm512_setzero_ps(); continue; }
      __m512 full, tail;
      lanes_one_key(qt, kg + size_t(t) * ldg, d / 16, full, tail);
      S[t] = _mm512_mul_ps(_mm512_mask_blend_ps(tail_lanes, full, tail), sv);
    }
  }
  transpose16x16(S);  // S[i] lane t = score of query i, key j0 + t
  for (int i = 0; i < nq; ++i) {
    const int count = n[i] - j0 < 16 ? n[i] - j0 : 16;
    if (count > 0) _mm512_mask_storeu_ps(s[i] + j0, mask16(count), S[i]);
  }
}

template <class E>
inline void attention_scores_prepared(const float* buf, int nq, const E* k, size_t ldk, const int* n, int d,
                                      float scale, float* const* s) {
  assert(nq <= kAttentionPreparedMaxQueries);
  if (!queries_in_lanes(d)) {
    for (int i = 0; i < nq; ++i)
      if (n[i] > 0) attention_scores(buf + size_t(i) * size_t(d), k, ldk, n[i], d, scale, s[i]);
    return;
  }
  int longest = 0;
  for (int i = 0; i < nq; ++i) longest = n[i] > longest ? n[i] : longest;
  const __m512 sv = _mm512_set1_ps(scale);
  for (int j0 = 0; j0 < longest; j0 += 16) {
    const int kcount = longest - j0 < 16 ? longest - j0 : 16;
    if constexpr (std::is_same_v<E, float>) {
      lanes_key_group(buf, nq, k + size_t(j0) * ldk, ldk, kcount, j0, n, d, sv, s);
    } else {  // bf16 rows widened exactly once per group (load16), then the f32 path
      alignas(64) float kf[16 * kAttentionPreparedMaxHeadDim];
      for (int t = 0; t < kcount; ++t)
        for (int c = 0; c < d; c += 16) _mm512_store_ps(kf + size_t(t) * d + c, load16(k + size_t(j0 + t) * ldk + c));
      lanes_key_group(buf, nq, kf, size_t(d), kcount, j0, n, d, sv, s);
    }
  }
}

// out[i] += sum_j p[i][j] v[j] for several queries over the same values, equal to attention_values per query
// bitwise: every output lane is the same FMA chain over j in the same order; 4 queries x 4 vectors (64 dims) of
// accumulators share each loaded value vector. Head dims not a multiple of 64, and queries beyond a multiple of 4,
// take the single kernel.
// The value vectors are held in registers for their 4 uses: GCC otherwise folds the load into each FMA (16 loads
// of 64 bytes per row instead of 4, the load ports then the limit). AMD Zen 5, one core, 16 queries x 512 or 1024
// f32 rows of 128 in L2, spans of 16 rows as attend_block calls it: 88-89 -> 150-157 GFLOP/s (f32 FMA peak 232).
template <class E>
inline void attention_values_multi(const float* const* p, int nq, const E* v, size_t ldv, int n, int d,
                                   float* const* out) {
  int i = 0;
  if (d % 64 == 0)
    for (; i + 4 <= nq; i += 4)
      for (int c0 = 0; c0 < d; c0 += 64) {
        __m512 acc[4][4];
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_loadu_ps(out[i + r] + c0 + 16 * c);
        for (int j = 0; j < n; ++j) {
          const E* vj = v + size_t(j) * ldv + c0;
          __m512 vv[4];
          for (int c = 0; c < 4; ++c) {
            vv[c] = load16(vj + 16 * c);
            __asm__("" : "+v"(vv[c]));  // a register operand (see above), not a memory operand of each FMA
          }
          for (int r = 0; r < 4; ++r) {
            const __m512 pj = _mm512_set1_ps(p[i + r][j]);
            for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(pj, vv[c], acc[r][c]);
          }
        }
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) _mm512_storeu_ps(out[i + r] + c0 + 16 * c, acc[r][c]);
      }
  for (; i < nq; ++i) attention_values(p[i], v, ldv, n, d, out[i]);
}

inline void axpy(float a, const float* x, float* y, int n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

inline void add(const float* x, float* y, int n) {
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

inline void rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(mask16(n - i), x + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  const float sum_sq = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  // Same expression as the scalar level: 1 / sqrt(mean + eps), then w * (x * inv_rms).
  const __m128 mean = _mm_set_ss(sum_sq / float(n) + eps);
  const float inv_rms = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(mean));
  const __m512 inv = _mm512_set1_ps(inv_rms);
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), v));
  }
}

inline void softmax(float* x, int n) {
  if (n <= 0) return;
  __m512 max_v = _mm512_set1_ps(-__builtin_inff());
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    max_v = _mm512_mask_max_ps(max_v, m, max_v, _mm512_maskz_loadu_ps(m, x + i));
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(max_v));
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mx));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

inline void silu_mul(const float* gate, const float* up, float* out, int n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

inline void rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; i += 16) {
    const __mmask16 m = mask16(half - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i), b = _mm512_maskz_loadu_ps(m, x + i + half);
    const __m512 c = _mm512_maskz_loadu_ps(m, cos + i), s = _mm512_maskz_loadu_ps(m, sin + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    _mm512_mask_storeu_ps(x + i + half, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
  }
}

}  // namespace avx512_impl
}  // namespace
}  // namespace mi::kernels

#pragma GCC diagnostic pop
