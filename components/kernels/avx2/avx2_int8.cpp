// The AVX2 level's int8-weight kernels (ckb/contracts/int8_weights.toml): y[r] = scale[r] * sum_c Q[r, c] * x[c].
// 8 int8 weights per load (VPMOVSXBD from 8 bytes, VCVTDQ2PS: both exact), FMA into f32 accumulators, 4 rows at a
// time (from 4 far-apart row groups) with two accumulators each; column tails in scalar code (no mask registers).
// Several tokens (batched decode, prefill) read each row once per 8 tokens, widening each weight vector once for 4.
// Intrinsics semantics: Intel Intrinsics Guide / Intel SDM vol. 2.
#include <immintrin.h>

#include "kernels/avx2/avx2.h"
#include "kernels/row_streams.h"

namespace mi::kernels {
namespace {
using std::size_t;

// Rows per tile, each from its own group of rows (row_streams.h). Measured (AMD EPYC Zen 3, 2 threads, 96 distinct
// 3072 x 1024 int8 matrices streamed from DRAM, 7 interleaved rounds, a throwaway harness checked bitwise equal):
// 4 groups 31-33 GB/s, 8 groups 28-30, 4 adjacent rows (before) 16.5-17.3.
constexpr int kInt8Rows = 4;

inline __m256 load_q8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R rows: row r at q + r * row_step, its scale and output at index r * y_step.
template <int R>
void dot_rows(const int8_t* q, const float* scale, size_t row_step, const float* x, float* y, size_t y_step,
              int cols) {
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
    for (int r = 0; r < R; ++r) {
      const int8_t* row = q + size_t(r) * row_step + c;
      acc0[r] = _mm256_fmadd_ps(load_q8(row), x0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(load_q8(row + 8), x1, acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    const int8_t* row = q + size_t(r) * row_step;
    for (int k = c; k < cols; ++k) tail += float(row[k]) * x[k];
    y[r * y_step] = scale[r * y_step] * (hsum8(_mm256_add_ps(acc0[r], acc1[r])) + tail);
  }
}

// One row x T tokens (2T accumulators, the row's two widened vectors; activations as memory operands): every weight
// vector is widened once for T tokens. Each (row, token) output takes exactly dot_rows' FMAs for that token (acc0 on
// columns c..c+7, acc1 on c+8..c+15, in column order, the same scalar tail and final sum), so a token of a batch gets
// the lone matvec's output bitwise (tests/unit/kernels/int8_test.cpp).
template <int T>
void dot_row_tokens(const int8_t* q, float scale, const float* x, size_t ldx, float* y, size_t ldy, int cols) {
  __m256 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m256 w0 = load_q8(q + c), w1 = load_q8(q + c + 8);
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + c), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * ldx + c + 8), acc1[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float tail = 0.0f;
    for (int k = c; k < cols; ++k) tail += float(q[k]) * x[t * ldx + k];
    y[t * ldy] = scale * (hsum8(_mm256_add_ps(acc0[t], acc1[t])) + tail);
  }
}

// Tokens per pass over a row, and tokens per pass over the matrix: up to kChunkTokens tokens' activations (32 KiB
// at 1024 columns) stay in L1/L2 while every row is read once for all of them, kTileTokens at a time from L1.
constexpr int kTileTokens = 4;
constexpr int kChunkTokens = 8;

void row_tokens(const int8_t* q, float scale, const float* x, size_t ldx, float* y, size_t ldy, int M, int cols) {
  int t = 0;
  for (; t + kTileTokens <= M; t += kTileTokens)
    dot_row_tokens<kTileTokens>(q, scale, x + t * ldx, ldx, y + t * ldy, ldy, cols);
  switch (M - t) {
    case 3: dot_row_tokens<3>(q, scale, x + t * ldx, ldx, y + t * ldy, ldy, cols); break;
    case 2: dot_row_tokens<2>(q, scale, x + t * ldx, ldx, y + t * ldy, ldy, cols); break;
    case 1: dot_row_tokens<1>(q, scale, x + t * ldx, ldx, y + t * ldy, ldy, cols); break;
    default: break;
  }
}

// Several tokens (batched decode, prefill): the weights are read once per kChunkTokens tokens instead of once per
// token, rows in the order of kInt8Rows far-apart groups (row_streams.h) so the reads stay long streams.
void matmul_i8(const int8_t* q, const float* scale, size_t ld, const float* x, size_t ldx, float* y, size_t ldy, int M,
               int rows, int cols) {
  for (int m0 = 0; m0 < M; m0 += kChunkTokens) {
    const int mc = M - m0 < kChunkTokens ? M - m0 : kChunkTokens;
    const float* xc = x + size_t(m0) * ldx;
    float* yc = y + size_t(m0) * ldy;
    const auto row = [&](int r) { row_tokens(q + size_t(r) * ld, scale[r], xc, ldx, yc + r, ldy, mc, cols); };
    for_row_streams<kInt8Rows>(
        rows,
        [&](int i, int n) {
          for (int g = 0; g < kInt8Rows; ++g) row(g * n + i);
        },
        row);
  }
}

// Tiles of R rows from R far-apart row groups (row_streams.h).
template <int R>
void matvec_i8(const int8_t* q, const float* scale, size_t ld, const float* x, float* y, int rows, int cols) {
  for_row_streams<R>(
      rows,
      [&](int i, int n) { dot_rows<R>(q + size_t(i) * ld, scale + i, size_t(n) * ld, x, y + i, size_t(n), cols); },
      [&](int r) { dot_rows<1>(q + size_t(r) * ld, scale + r, ld, x, y + r, 1, cols); });
}
}  // namespace

void Avx2::matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows, int cols) {
  matvec_i8<kInt8Rows>(Q, scale, ld, x, y, rows, cols);
}
void Avx2::matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx, float* Y,
                  std::size_t ldy, int M, int rows, int cols) {
  if (M == 1) return matvec_i8<kInt8Rows>(Q, scale, ld, X, Y, rows, cols);
  matmul_i8(Q, scale, ld, X, ldx, Y, ldy, M, rows, cols);
}

}  // namespace mi::kernels
