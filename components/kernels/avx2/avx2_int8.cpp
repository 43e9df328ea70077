// The AVX2 level's int8-weight kernels (ckb/contracts/int8_weights.toml): y[r] = scale[r] * sum_c Q[r, c] * x[c].
// 8 int8 weights per load (VPMOVSXBD from 8 bytes, VCVTDQ2PS: both exact), FMA into f32 accumulators, 4 rows at a
// time (from 4 far-apart row groups) with two accumulators each; column tails in scalar code (no mask registers).
// Several tokens (batched decode, prefill) run the matvec per token over L2-sized blocks of rows.
// Intrinsics semantics: Intel Intrinsics Guide / Intel SDM vol. 2.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx2/avx2.h"
#include "kernels/row_streams.h"

namespace mi::kernels {
namespace {
using std::size_t;

// Rows per tile, each from its own group of rows (row_streams.h). Measured (AMD EPYC Zen 3, 2 threads, 96 distinct
// 3072 x 1024 int8 matrices streamed from DRAM, 7 interleaved rounds, a throwaway harness checked bitwise equal):
// 4 groups 31-33 GB/s, 8 groups 28-30, 4 adjacent rows (before) 16.5-17.3.
constexpr int kInt8Rows = 4;
// Rows of a several-token block, in bytes of int8 weights (see Avx2::matmul).
constexpr size_t kBlockBytes = size_t(128) << 10;

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
  // Several tokens (batched decode, prefill): the lone matvec per token over blocks of rows small enough to stay in
  // L2 (kBlockBytes), so each row comes from DRAM once for all M tokens and a token's output is the lone matvec's
  // bitwise. Measured (AMD EPYC Zen 3, 2 threads, M = 8, a throwaway harness): a 151936 x 1024 LM head 29-30 ms
  // against 44-50 ms for M whole-matrix passes; 48 layer matrices of 3072 x 1024 (L3-resident after one pass) 27.5 ms
  // against 28.7. A 4-token register tile (one widening per 4 tokens) was slower, 35 ms on both: its activations
  // (16 KiB per pass) come from L2 at one load per FMA.
  const int block = std::max(16, int(kBlockBytes / std::max<size_t>(1, size_t(cols))));
  for (int r0 = 0; r0 < rows; r0 += block) {
    const int n = std::min(block, rows - r0);
    for (int m = 0; m < M; ++m)
      matvec_i8<kInt8Rows>(Q + size_t(r0) * ld, scale + r0, ld, X + size_t(m) * ldx, Y + size_t(m) * ldy + r0, n,
                           cols);
  }
}

}  // namespace mi::kernels
