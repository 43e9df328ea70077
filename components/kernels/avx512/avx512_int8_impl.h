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

// ---- decode and batched decode (1..kMaxDotTokens tokens) -----------------------------------------------------
// The dot forms of avx512_impl.h with an int8 step: the weights of one 16-column step sign-extended and converted
// to f32 (exact), one FMA per (row, token) into one accumulator, the row's sum scaled once at the end. So the int8
// kernels inherit the dot forms' blocking (R rows x T tokens per block: 4 far-apart row streams for one token, 3 x 8
// at 8 tokens, every converted weight vector used for all T tokens), their prefetch (MI_TUNE_DOT_PREFETCH,
// MI_TUNE_BATCH_PREFETCH) and their contract: each token's row of a batched step equals its lone matvec bitwise, so
// an int8 engine's greedy output does not depend on what a request is batched with. (Before, the batched kernel walked one row x T tokens
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
// The f32 outer-product kernel of avx512_impl.h (matmul): its panels widen int8 exactly to f32 when packing (load16),
// once per panel for every token of a kMC-token block (1024), then the row scale is applied to each sum. Measured on
// AMD Zen 4 (2 threads, 16 distinct int8 matrices streamed, medians; experience OPT-025): 154 / 155 / 143 ->
// 199 / 203 / 206 GFLOP/s on 256 x 3072 x 1024, 256 x 1024 x 3072 and 1021 x 1024 x 2048, against the earlier
// dot-form blocks over a widened 16-row strip (one horizontal sum per row, token and 512 columns).
inline void matmul(const int8_t* q, const float* scale, size_t ld, const float* x, size_t ldx, float* y, size_t ldy,
                   int M, int rows, int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return avx512_impl::zero_outputs(y, ldy, M, rows);
  if (M <= kMaxDotTokens) return dot_rows_tokens(q, scale, ld, x, ldx, y, ldy, M, rows, cols);
  avx512_impl::matmul(q, ld, x, ldx, y, ldy, M, rows, cols);
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < rows; ++r) y[size_t(m) * ldy + r] *= scale[r];
}

}  // namespace avx512_int8
}  // namespace
}  // namespace mi::kernels

#pragma GCC diagnostic pop
