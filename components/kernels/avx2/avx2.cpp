// The AVX2 level. Same algorithms as the AVX-512 level (kernels/avx512/avx512_impl.h explains them), with 8-lane
// vectors and without mask registers: column tails are scalar loops, packed-panel edges are filled element-wise.
// Intrinsics semantics: Intel Intrinsics Guide / Intel SDM vol. 2.
#include "kernels/avx2/avx2.h"
#include "kernels/row_streams.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mi::kernels {
namespace {
using std::size_t;

// ---- loads ------------------------------------------------------------------------------------------------
// Local scalar helpers instead of mi::bf16_to_f32 / mi::f32_to_bf16: an inline function from a shared header
// compiled here with AVX2 flags could be the copy the linker keeps for the whole program.
inline float widen1(float v) { return v; }
inline float widen1(bf16_t v) {
  const uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t round1(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline __m256 widen_bf16(__m128i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)); }
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const bf16_t* p) { return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, n) of an 8-lane mask for maskload/maskstore (n clamped to [0, 8]).
inline __m256i lane_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ---- exp (same method and bound as avx512_impl::exp_ps) -----------------------------------------------------
inline __m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);  // NaN propagates: MAXPS/MINPS return the second operand
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// ---- decode, batched decode, short prefill: one weight pass for 1..kMaxDotFormTokens tokens ------------------
// Y[t, r] = dot(W row r, X token t) in dot form: each (row, token) output owns one 8-lane accumulator that takes
// two FMAs per 16-column step, then one horizontal sum. A block of R rows x T tokens keeps R*T accumulators and the
// T tokens' activation vectors in registers, so one weight load serves T tokens and one activation load R rows.
//
// bf16 weights are split without a shuffle: a 256-bit load holds 16 bf16 with elements 2i and 2i+1 in 32-bit
// lane i, so `v << 16` is the even columns as f32 and `v & 0xffff0000` the odd ones (2 ALU ops per 16 columns
// where zero-extension takes 4). The activations are split the same way once per call into a stack buffer
// (per token, per 16 columns: 8 even then 8 odd). f32 weights need no split: their two vectors are columns
// [c, c+8) and [c+8, c+16) and the activations are read in place.
//
// Why these shapes (AMD EPYC Zen 3, one thread, 3072 x 1024 bf16, M = 8, best of 7): weights in cache 71-74
// GFLOP/s (about 78 % of the 95 GFLOP/s FMA peak measured in the same moment) against 38-39 for the previous
// two-accumulator, zero-extending form; 48 distinct matrices streamed from DRAM 46-50 ms against 67-87 ms (B = 1
// matvec: 31-35 ms). R = 4, T = 2: 8 accumulators + 4 activations + 2 weight halves in 16 ymm registers; R = 3 or
// T = 3 measured slower. The even/odd split alone was worth 1.3x over zero-extension in the same tile.
// `bench_kernels --benchmark_filter=BM_Matmul` has the M = 8 shapes (in cache and lm_head-sized, streamed).
//
// Bitwise contract: up to kMaxDotTokens tokens, an output's arithmetic (the FMA order over columns, the chunking,
// the horizontal sum, the scalar tail) depends only on its row and token, never on R, T, M or where the row starts,
// so a token decoded in a batch gets exactly the logits it gets alone (tests/unit/kernels/matmul_test.cpp,
// FewTokensEqualMatvecPerTokenBitwise; served greedy output does not depend on what a request is batched with).
//
// Short prefills (kMaxDotTokens < M <= kMaxDotFormTokens) take the same dot form with narrower column chunks (the
// activation buffer still holds 8 x 4096 floats: chunk = 32768 / M columns, a multiple of 16), so their outputs
// depend on M as well. Why: the packed outer-product path below packs every 16 x 256 weight panel to f32 whatever
// M is, which a 16- or 32-token chunk cannot pay back. Measured (AMD EPYC Zen 3, one thread, 48 distinct 3072 x
// 1024 bf16 matrices streamed from DRAM, CPU time, interleaved rounds under compile load): M = 16 74-81 ms dot form
// vs 113-133 packed, M = 24 113-142 vs 148-169, M = 32 140-179 vs 202-243, M = 40 and 48 no clear winner, M = 64
// packed 302-304 vs 307-338.
constexpr int kMaxDotTokens = 8;
constexpr int kMaxDotFormTokens = 32;
constexpr int kDotRows = 4;
constexpr int kDotTokens = 2;
// Columns per activation chunk: 8 tokens x 4096 f32 = 128 KiB of stack. Outputs sum chunk by chunk (a horizontal
// sum per chunk), at boundaries fixed in absolute columns so matvec and batched decode chunk alike.
constexpr int kDotChunk = 4096;

struct SplitBf16Weights {  // bf16 weights: even / odd columns of a 16-column step
  static constexpr bool kSplitActivations = true;
  static void load(const bf16_t* w, __m256& a, __m256& b) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    a = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    b = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
};
struct PlainF32Weights {  // f32 weights: columns [c, c+8) and [c+8, c+16)
  static constexpr bool kSplitActivations = false;
  static void load(const float* w, __m256& a, __m256& b) {
    a = _mm256_loadu_ps(w);
    b = _mm256_loadu_ps(w + 8);
  }
};
template <class W> struct WeightSplit;
template <> struct WeightSplit<bf16_t> { using type = SplitBf16Weights; };
template <> struct WeightSplit<float> { using type = PlainF32Weights; };

// Activations of M tokens, columns [0, kc) (kc a multiple of 16) -> xs[t * kc + ...], each 16-column step as its
// 8 even columns then its 8 odd columns (matching SplitBf16Weights).
template <class X>
inline void split_activations(const X* x, size_t ldx, int M, int kc, float* xs) {
  for (int t = 0; t < M; ++t)
    for (int c = 0; c < kc; c += 16) {
      const __m256 a = load8(x + t * ldx + c), b = load8(x + t * ldx + c + 8);
      // shuffle_ps picks within 128-bit halves: [a0 a2 b0 b2 | a4 a6 b4 b6]; the 64-bit permute restores order.
      const __m256 even = _mm256_shuffle_ps(a, b, 0x88), odd = _mm256_shuffle_ps(a, b, 0xdd);
      _mm256_storeu_ps(xs + size_t(t) * kc + c, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xd8)));
      _mm256_storeu_ps(xs + size_t(t) * kc + c + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xd8)));
    }
}

// R rows x T tokens over kc columns (a multiple of 16) of one chunk; adds each output's chunk sum into y
// (first chunk: stores it). Tile row r is weight row w + r * row_step and output y[t * ldy + r * y_step].
// x: the chunk's activations, token stride ldx, in the order Split expects.
template <int R, int T, class Split, class W>
inline void dot_tile(const W* w, size_t row_step, const float* x, size_t ldx, int kc, float* y, size_t ldy,
                     size_t y_step, bool first) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int c = 0; c < kc; c += 16) {
    __m256 xa[T], xb[T];
    for (int t = 0; t < T; ++t) {
      xa[t] = _mm256_loadu_ps(x + t * ldx + c);
      xb[t] = _mm256_loadu_ps(x + t * ldx + c + 8);
    }
    for (int r = 0; r < R; ++r) {
      __m256 wa, wb;
      Split::load(w + r * row_step + c, wa, wb);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(wa, xa[t], acc[r][t]);
        acc[r][t] = _mm256_fmadd_ps(wb, xb[t], acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float& out = y[t * ldy + r * y_step];
      out = first ? hsum(acc[r][t]) : out + hsum(acc[r][t]);
    }
}

// One chunk for all rows and tokens. A tile's R rows come from R far-apart groups of the block (row_streams.h: the
// tiles walk R long sequential streams). Why (AMD EPYC Zen 3, 2 threads, 48 distinct 3072 x 1024 bf16 matrices
// streamed from DRAM, 7 interleaved rounds, -O3, a throwaway harness checked bitwise equal): M = 1 34-42 GB/s against
// 24-28 for R adjacent rows with software prefetch 16 rows on (the read-bandwidth probe: 31-39 GB/s that hour);
// 12 groups fell back to 26-32 (too many streams); M = 8 (4 groups x 2 tokens) 120-133 GFLOP/s against 112-120.
// Software prefetch on top of the groups measured slower, so there is none.
// Tokens go kDotTokens at a time (then one), the token loop inside the row loop so a tile's later reads come from L1.
template <int R, class Split, class W>
inline void dot_rows(const W* w, size_t ld, const float* x, size_t ldx, int kc, float* y, size_t ldy, int M, int rows,
                     bool first) {
  const auto tokens = [&](auto rows_tag, const W* wr, size_t row_step, float* yr, size_t y_step) {
    constexpr int RB = decltype(rows_tag)::value;
    int t = 0;
    for (; t + kDotTokens <= M; t += kDotTokens)
      dot_tile<RB, kDotTokens, Split>(wr, row_step, x + t * ldx, ldx, kc, yr + t * ldy, ldy, y_step, first);
    for (; t < M; ++t) dot_tile<RB, 1, Split>(wr, row_step, x + t * ldx, ldx, kc, yr + t * ldy, ldy, y_step, first);
  };
  for_row_streams<R>(
      rows,
      [&](int i, int n) {
        tokens(std::integral_constant<int, R>{}, w + size_t(i) * ld, size_t(n) * ld, y + i, size_t(n));
      },
      [&](int r) { tokens(std::integral_constant<int, 1>{}, w + size_t(r) * ld, ld, y + r, 1); });
}

// One token (decode) is a pure weight stream: 8 rows (streams) per tile. Several tokens: 4 rows x 2 tokens.
template <class Split, class W>
inline void dot_chunk(const W* w, size_t ld, const float* x, size_t ldx, int kc, float* y, size_t ldy, int M, int rows,
                      bool first) {
  if (M == 1) dot_rows<8, Split>(w, ld, x, ldx, kc, y, ldy, M, rows, first);
  else dot_rows<kDotRows, Split>(w, ld, x, ldx, kc, y, ldy, M, rows, first);
}

// Y[t, r] for M in [1, kMaxDotFormTokens] tokens (M = 1 is matvec); chunks of kDotChunk columns up to
// kMaxDotTokens tokens (the bitwise contract above), narrower past it so the split activations fit the buffer.
template <class W, class X>
inline void matmul_few_tokens(const W* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M, int rows,
                              int cols) {
  using Split = typename WeightSplit<W>::type;
  const int cols16 = cols / 16 * 16;
  alignas(32) float xs[Split::kSplitActivations ? kMaxDotTokens * kDotChunk : 1];
  const int chunk = M <= kMaxDotTokens ? kDotChunk : (kMaxDotTokens * kDotChunk / M) / 16 * 16;
  for (int k0 = 0; k0 < cols16; k0 += chunk) {
    const int kc = cols16 - k0 < chunk ? cols16 - k0 : chunk;
    if constexpr (Split::kSplitActivations) {
      split_activations(x + k0, ldx, M, kc, xs);
      dot_chunk<Split>(w + k0, ld, xs, size_t(kc), kc, y, ldy, M, rows, k0 == 0);
    } else {
      static_assert(std::is_same_v<X, float>, "f32 weights take f32 activations");
      dot_chunk<Split>(w + k0, ld, x + k0, ldx, kc, y, ldy, M, rows, k0 == 0);
    }
  }
  // Columns past the last 16-column step: a scalar tail in column order.
  if (cols16 == cols && cols > 0) return;
  for (int t = 0; t < M; ++t)
    for (int r = 0; r < rows; ++r) {
      float s = cols16 > 0 ? y[t * ldy + r] : 0.0f;
      for (int k = cols16; k < cols; ++k) s += widen1(w[size_t(r) * ld + k]) * widen1(x[t * ldx + k]);
      y[t * ldy + r] = s;
    }
}

template <class W, class X>
inline void matvec(const W* w, size_t ld, const X* x, float* y, int rows, int cols) {
  matmul_few_tokens(w, ld, x, 0, y, 0, 1, rows, cols);
}

// ---- prefill past kMaxDotFormTokens: outer-product micro-kernel 6 tokens x 16 rows (12 of 16 ymm registers) ---
constexpr int kNR = 16;
constexpr int kMR = 6;
constexpr int kKC = 256;
constexpr int kMC = 120;

// 8x8 transpose of 32-bit elements: t[i] lane j -> t[j] lane i.
inline void transpose8x8(__m256 t[8]) {
  __m256 u[8];
  for (int q = 0; q < 2; ++q) {
    const __m256 a0 = _mm256_unpacklo_ps(t[4 * q + 0], t[4 * q + 1]);
    const __m256 a1 = _mm256_unpackhi_ps(t[4 * q + 0], t[4 * q + 1]);
    const __m256 a2 = _mm256_unpacklo_ps(t[4 * q + 2], t[4 * q + 3]);
    const __m256 a3 = _mm256_unpackhi_ps(t[4 * q + 2], t[4 * q + 3]);
    u[4 * q + 0] = _mm256_shuffle_ps(a0, a2, 0x44);
    u[4 * q + 1] = _mm256_shuffle_ps(a0, a2, 0xEE);
    u[4 * q + 2] = _mm256_shuffle_ps(a1, a3, 0x44);
    u[4 * q + 3] = _mm256_shuffle_ps(a1, a3, 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    t[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// dst[k*16 + r] = W[r, k] as f32 for r < nr, k < kc; rows nr..15 are zero. Full 8x8 tiles go through registers,
// edge tiles element by element.
template <class W>
inline void pack_panel(const W* w, size_t ld, int nr, int kc, float* dst) {
  for (int r0 = 0; r0 < kNR; r0 += 8) {
    for (int k = 0; k < kc; k += 8) {
      if (r0 + 8 <= nr && k + 8 <= kc) {
        __m256 t[8];
        for (int i = 0; i < 8; ++i) t[i] = load8(w + size_t(r0 + i) * ld + k);
        transpose8x8(t);
        for (int j = 0; j < 8; ++j) _mm256_store_ps(dst + size_t(k + j) * kNR + r0, t[j]);
      } else {
        const int kn = kc - k < 8 ? kc - k : 8;
        for (int j = 0; j < kn; ++j)
          for (int i = 0; i < 8; ++i)
            dst[size_t(k + j) * kNR + r0 + i] = r0 + i < nr ? widen1(w[size_t(r0 + i) * ld + k + j]) : 0.0f;
      }
    }
  }
}

template <int MR>
inline void micro(const float* panel, const float* x, size_t ldx, int kc, float* y, size_t ldy, int nr,
                  bool accumulate) {
  __m256 c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m256 w0 = _mm256_load_ps(panel + size_t(k) * kNR);
    const __m256 w1 = _mm256_load_ps(panel + size_t(k) * kNR + 8);
    for (int i = 0; i < MR; ++i) {
      const __m256 xb = _mm256_broadcast_ss(x + i * ldx + k);
      c0[i] = _mm256_fmadd_ps(w0, xb, c0[i]);
      c1[i] = _mm256_fmadd_ps(w1, xb, c1[i]);
    }
  }
  if (nr == kNR) {
    for (int i = 0; i < MR; ++i) {
      float* yi = y + i * ldy;
      if (accumulate) {
        c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(yi));
        c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(yi + 8));
      }
      _mm256_storeu_ps(yi, c0[i]);
      _mm256_storeu_ps(yi + 8, c1[i]);
    }
  } else {
    const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
    for (int i = 0; i < MR; ++i) {
      float* yi = y + i * ldy;
      if (accumulate) {
        c0[i] = _mm256_add_ps(c0[i], _mm256_maskload_ps(yi, m0));
        c1[i] = _mm256_add_ps(c1[i], _mm256_maskload_ps(yi + 8, m1));
      }
      _mm256_maskstore_ps(yi, m0, c0[i]);
      _mm256_maskstore_ps(yi + 8, m1, c1[i]);
    }
  }
}

inline void micro_dispatch(int mr, const float* panel, const float* x, size_t ldx, int kc, float* y, size_t ldy,
                           int nr, bool accumulate) {
  switch (mr) {
    case 1: micro<1>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    case 2: micro<2>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    case 3: micro<3>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    case 4: micro<4>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    case 5: micro<5>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    case 6: micro<6>(panel, x, ldx, kc, y, ldy, nr, accumulate); break;
    default: break;
  }
}

inline const float* x_as_f32(const float* x, size_t ldx, int, int, float*, size_t& ld_out) {
  ld_out = ldx;
  return x;
}
inline const float* x_as_f32(const bf16_t* x, size_t ldx, int mr, int kc, float* buf, size_t& ld_out) {
  for (int i = 0; i < mr; ++i) {
    int k = 0;
    for (; k + 8 <= kc; k += 8) _mm256_storeu_ps(buf + size_t(i) * kKC + k, load8(x + i * ldx + k));
    for (; k < kc; ++k) buf[size_t(i) * kKC + k] = widen1(x[i * ldx + k]);
  }
  ld_out = kKC;
  return buf;
}

// Stack use: 16 KiB packed panel + 6 KiB widened activations (bf16 X only).
template <class W, class X>
inline void matmul(const W* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M, int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) {
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < rows; ++r) y[size_t(m) * ldy + r] = 0.0f;
    return;
  }
  if (M <= kMaxDotFormTokens) return matmul_few_tokens(w, ld, x, ldx, y, ldy, M, rows, cols);  // decode, short prefill
  alignas(32) float panel[kKC * kNR];
  alignas(32) float xbuf[kMR * kKC];
  for (int m0 = 0; m0 < M; m0 += kMC) {
    const int mc = M - m0 < kMC ? M - m0 : kMC;
    for (int r0 = 0; r0 < rows; r0 += kNR) {
      const int nr = rows - r0 < kNR ? rows - r0 : kNR;
      for (int k0 = 0; k0 < cols; k0 += kKC) {
        const int kc = cols - k0 < kKC ? cols - k0 : kKC;
        pack_panel(w + size_t(r0) * ld + k0, ld, nr, kc, panel);
        for (int i0 = 0; i0 < mc; i0 += kMR) {
          const int mr = mc - i0 < kMR ? mc - i0 : kMR;
          size_t ldxf = 0;
          const float* xf = x_as_f32(x + size_t(m0 + i0) * ldx + k0, ldx, mr, kc, xbuf, ldxf);
          micro_dispatch(mr, panel, xf, ldxf, kc, y + size_t(m0 + i0) * ldy + r0, ldy, nr, k0 > 0);
        }
      }
    }
  }
}

// ---- element-wise -----------------------------------------------------------------------------------------
// Round to nearest even exactly as mi::f32_to_bf16 (see avx512_impl::round_to_bf16); 16 values -> 16 bf16.
inline __m256i round16_to_bf16(__m256 a, __m256 b) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i out[2];
  const __m256 in[2] = {a, b};
  for (int h = 0; h < 2; ++h) {
    const __m256i u = _mm256_castps_si256(in[h]);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);  // both operands >= 0
    out[h] = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), is_nan);
  }
  // packus works per 128-bit lane: [a0..3 b0..3 a4..7 b4..7]; restore order with a 64-bit permute.
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(out[0], out[1]), 0xD8);
}

}  // namespace

void Avx2::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  mi::kernels::matvec(W, ld, x, y, rows, cols);
}
void Avx2::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  mi::kernels::matvec(W, ld, x, y, rows, cols);
}
void Avx2::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  mi::kernels::matvec(W, ld, x, y, rows, cols);
}
void Avx2::matmul(const bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy, int M,
                  int rows, int cols) {
  mi::kernels::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx2::matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy, int M,
                  int rows, int cols) {
  mi::kernels::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx2::matmul_fast(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y, std::size_t ldy,
                       int M, int rows, int cols) {
  mi::kernels::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}

void Avx2::to_bf16(const float* x, bf16_t* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round16_to_bf16(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8)));
  for (; i < n; ++i) y[i].bits = round1(x[i]);
}

float Avx2::dot(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

namespace {
// y += a * x over f32 or bf16 x (widened exactly): the same operations in the same order for both.
template <class E>
inline void axpy_row(float a, const E* x, float* y, int n) {
  const __m256 av = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, load8(x + i), _mm256_loadu_ps(y + i)));
  // An explicit FMA: left to -ffp-contract, GCC fused the bf16 form and not the f32 one.
  for (; i < n; ++i) y[i] = std::fma(a, widen1(x[i]), y[i]);
}
}  // namespace
void Avx2::axpy(float a, const float* x, float* y, int n) { axpy_row(a, x, y, n); }

// Scores: the dot product inlined per key (two accumulators, one horizontal sum per key), four keys at a time so
// that eight independent FMA chains hide the FMA latency (one key's two chains left the loop latency-bound: 7.0 vs
// 9.5 ns per 128-dim key, AMD EPYC Zen 3, L1-resident, under load). Each key's arithmetic is the one-key loop's, in
// the same order, so the grouping does not change a score. Keys and values are f32 or bf16 (E; fast numerics' KV
// cache), widened exactly by load8 / widen1: a bf16 row gives what the f32 kernel gives for the widened row.
// The rows are prefetched kKvPrefetchBytes ahead, once per line where kv_line_start says (row_streams.h).
namespace {

template <class E>
inline float key_score(const float* q, const E* kj, int d16, int d, __m256 acc0, __m256 acc1, float scale) {
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (int i = d16; i < d; ++i) sum = std::fma(q[i], widen1(kj[i]), sum);  // explicit, as in axpy_row
  return sum * scale;
}

template <class E>
void scores_rows(const float* q, const E* k, std::size_t ldk, int n, int d, float scale, float* s) {
  const int d16 = d / 16 * 16;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    const E* kj = k + size_t(j) * ldk;
    __m256 acc0[4], acc1[4];
    for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (int i = 0; i < d16; i += 16) {
      const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
      if (kv_line_start<E>(i, d))
        for (int r = 0; r < 4; ++r) prefetch_kv(kj + r * ldk + i);
      for (int r = 0; r < 4; ++r) {
        acc0[r] = _mm256_fmadd_ps(q0, load8(kj + r * ldk + i), acc0[r]);
        acc1[r] = _mm256_fmadd_ps(q1, load8(kj + r * ldk + i + 8), acc1[r]);
      }
    }
    if (d16 < d)  // the rows' last line, read by key_score
      for (int r = 0; r < 4; ++r) prefetch_kv(kj + r * ldk + d16);
    for (int r = 0; r < 4; ++r) s[j + r] = key_score(q, kj + r * ldk, d16, d, acc0[r], acc1[r], scale);
  }
  for (; j < n; ++j) {
    const E* kj = k + size_t(j) * ldk;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 16)
      if (kv_line_start<E>(i, d)) prefetch_kv(kj + i);
    for (int i = 0; i < d16; i += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(kj + i), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(kj + i + 8), acc1);
    }
    s[j] = key_score(q, kj, d16, d, acc0, acc1, scale);
  }
}

// Values: 64 output dims (8 vectors) in registers per pass over the n keys.
template <class E>
void values_rows(const float* p, const E* v, std::size_t ldv, int n, int d, float* out) {
  int c0 = 0;
  for (; c0 + 64 <= d; c0 += 64) {
    __m256 acc[8];
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_loadu_ps(out + c0 + 8 * c);
    for (int j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const E* vj = v + size_t(j) * ldv + c0;
      if (c0 == 0)  // the whole row: later passes re-read it from cache
        for (int i = 0; i < d; i += 16)
          if (kv_line_start<E>(i, d)) prefetch_kv(v + size_t(j) * ldv + i);
      for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(pj, load8(vj + 8 * c), acc[c]);
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + c0 + 8 * c, acc[c]);
  }
  if (c0 < d)
    for (int j = 0; j < n; ++j) {
      if (c0 == 0)  // d < 64: no pass above prefetched the row
        for (int i = 0; i < d; i += 16)
          if (kv_line_start<E>(i, d)) prefetch_kv(v + size_t(j) * ldv + i);
      axpy_row(p[j], v + size_t(j) * ldv + c0, out + c0, d - c0);
    }
}
}  // namespace

void Avx2::attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale, float* s) {
  scores_rows(q, k, ldk, n, d, scale, s);
}
void Avx2::attention_scores(const float* q, const bf16_t* k, std::size_t ldk, int n, int d, float scale, float* s) {
  scores_rows(q, k, ldk, n, d, scale, s);
}
void Avx2::attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out) {
  values_rows(p, v, ldv, n, d, out);
}
void Avx2::attention_values(const float* p, const bf16_t* v, std::size_t ldv, int n, int d, float* out) {
  values_rows(p, v, ldv, n, d, out);
}

// Query blocks kept as rows and scored (and summed) one query at a time (kernel_api.h).
void Avx2::attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  prepare_query_rows(q, nq, d, buf);
}
void Avx2::attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n, int d,
                                     float scale, float* const* s) {
  attention_scores_prepared_by_query<Avx2>(buf, nq, k, ldk, n, d, scale, s);
}
void Avx2::attention_scores_prepared(const float* buf, int nq, const bf16_t* k, std::size_t ldk, const int* n, int d,
                                     float scale, float* const* s) {
  attention_scores_prepared_by_query<Avx2>(buf, nq, k, ldk, n, d, scale, s);
}
void Avx2::attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,
                                  int d, float* const* out) {
  attention_values_by_query<Avx2>(p, nq, v, ldv, n, d, out);
}
void Avx2::attention_values_multi(const float* const* p, int nq, const bf16_t* v, std::size_t ldv, int n,
                                  int d, float* const* out) {
  attention_values_by_query<Avx2>(p, nq, v, ldv, n, d, out);
}
void Avx2::add(const float* x, float* y, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void Avx2::rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  float sum_sq = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv_rms = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(sum_sq / float(n) + eps)));
  const __m256 inv = _mm256_set1_ps(inv_rms);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), inv)));
  for (; i < n; ++i) y[i] = w[i] * (x[i] * inv_rms);
}

// Full 8-lane steps use plain loads and stores; only the tail goes through a mask (maskload reads nothing outside it).
// Masked stores in every step made softmax over 160 scores take 330-480 ns instead of 150 (AMD EPYC Zen 3, one
// thread, L1-resident, under load). Every lane's arithmetic is the same either way: the results are bitwise equal.
void Avx2::softmax(float* x, int n) {
  if (n <= 0) return;
  const int n8 = n / 8 * 8;
  const __m256i tail = lane_mask(n - n8);
  __m256 max_v = _mm256_set1_ps(-__builtin_inff());
  for (int i = 0; i < n8; i += 8) max_v = _mm256_max_ps(max_v, _mm256_loadu_ps(x + i));
  if (n8 < n) max_v = _mm256_max_ps(max_v, _mm256_blendv_ps(max_v, _mm256_maskload_ps(x + n8, tail), _mm256_castsi256_ps(tail)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(max_v), _mm256_extractf128_ps(max_v, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const __m256 mx = _mm256_set1_ps(_mm_cvtss_f32(m4));
  __m256 sum = _mm256_setzero_ps();
  for (int i = 0; i < n8; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n8 < n) {
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + n8, tail), mx)), _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(x + n8, tail, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
  for (int i = 0; i < n8; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  if (n8 < n) _mm256_maskstore_ps(x + n8, tail, _mm256_mul_ps(_mm256_maskload_ps(x + n8, tail), inv));
}

void Avx2::silu_mul(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const auto silu_times = [&](__m256 g, __m256 u) {
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
  };
  const int n8 = n / 8 * 8;  // full steps plain, the tail masked (as softmax)
  for (int i = 0; i < n8; i += 8) _mm256_storeu_ps(out + i, silu_times(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (n8 < n) {
    const __m256i m = lane_mask(n - n8);
    _mm256_maskstore_ps(out + n8, m, silu_times(_mm256_maskload_ps(gate + n8, m), _mm256_maskload_ps(up + n8, m)));
  }
}

void Avx2::rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; i += 8) {
    const __m256i m = lane_mask(half - i);
    const __m256 a = _mm256_maskload_ps(x + i, m), b = _mm256_maskload_ps(x + i + half, m);
    const __m256 c = _mm256_maskload_ps(cos + i, m), s = _mm256_maskload_ps(sin + i, m);
    _mm256_maskstore_ps(x + i, m, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
    _mm256_maskstore_ps(x + i + half, m, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
  }
}

}  // namespace mi::kernels
