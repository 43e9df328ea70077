// The AVX-512 BF16 level: precise kernels and element-wise ops are the avx512 ones (kernels/avx512/avx512_impl.h,
// compiled here again with this level's flags); fast decode (up to 8 tokens) takes the dot forms with the VDPBF16PS
// or the FMA step (MI_TUNE_BF16_DECODE below); fast prefill (more than 8 tokens) uses
// VDPBF16PS (_mm512_dpbf16_ps: lane i += a[2i]*b[2i] + a[2i+1]*b[2i+1], 32 bf16 multiply-adds into 16 f32 lanes) on
// packed bf16 pairs, or the FMA kernel, as the tuning parameter MI_TUNE_BF16_PREFILL says (bf16_dot_impl.h).
#include "kernels/avx512bf16/avx512bf16.h"

#include "kernels/avx512/avx512_impl.h"
#include "kernels/avx512bf16/bf16_dot_impl.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in its own headers (GCC bug 105593)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mi::kernels {
namespace impl = avx512_impl;

void Avx512Bf16::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512Bf16::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
// Fast decode and batched decode (up to 8 tokens): the dot forms with bf16 weights and bf16 activations, in the step
// the tuning parameter MI_TUNE_BF16_DECODE names (ckb/platforms [[tuning]]; experience OPT-017):
//   1 (default) VDPBF16PS (bf16_dot_impl::DpBf16): 32 bf16 products per instruction, neither operand widened. On
//     AMD Zen 4 (EPYC, 512-bit FMA at half the rate of Zen 5) 8 tokens take 30-31 ms per 840 MB of weights against
//     41-47 with FMA (2 threads); one token alike (26-29 ms).
//   0 both operands widened exactly to f32 and the FMA dot forms of the avx512 level. Chosen on AMD Zen 5, where
//     the VDPBF16PS form read 43-49 GB/s at one token against 56-58 (OPT-014; then with L1 prefetches, not
//     re-measured with the L2 prefetch of MI_TUNE_DOT_PREFETCH): `metainfer generate --tune` decides per host.
// Products of bf16 values are exact in f32 either way (VDPBF16PS also flushes denormal inputs and results). Whatever
// the choice, one token and every token's row of a batched step take the same step, so each token's row of a batched
// step is its lone matvec_fast bitwise (the dot forms' contract).
#ifndef MI_TUNE_BF16_DECODE
#define MI_TUNE_BF16_DECODE 1
#endif
static_assert(MI_TUNE_BF16_DECODE == 0 || MI_TUNE_BF16_DECODE == 1, "MI_TUNE_BF16_DECODE: 0 or 1");
namespace {
void fast_few_tokens(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y, std::size_t ldy,
                     int M, int rows, int cols) {
  if constexpr (MI_TUNE_BF16_DECODE == 1) bf16_dot_impl::matmul_fast_few(W, ld, X, ldx, Y, ldy, M, rows, cols);
  else if (M == 1) impl::matvec(W, ld, X, Y, rows, cols);
  else impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
}  // namespace
void Avx512Bf16::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  fast_few_tokens(W, ld, x, 0, y, 0, 1, rows, cols);
}
void Avx512Bf16::matmul(const bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                        int M, int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512Bf16::matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                        int M, int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512Bf16::matmul_fast(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y,
                             std::size_t ldy, int M, int rows, int cols) {
  if (M <= impl::kMaxDotTokens) return fast_few_tokens(W, ld, X, ldx, Y, ldy, M, rows, cols);
  if (MI_TUNE_BF16_PREFILL == 1 && rows > 0 && cols > 0)
    return bf16_dot_impl::matmul_pairs(W, ld, X, ldx, Y, ldy, M, rows, cols);  // prefill: packed bf16 pairs
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512Bf16::to_bf16(const float* x, bf16_t* y, int n) { impl::to_bf16(x, y, n); }
float Avx512Bf16::dot(const float* a, const float* b, int n) { return impl::dot(a, b, n); }
void Avx512Bf16::axpy(float a, const float* x, float* y, int n) { impl::axpy(a, x, y, n); }
void Avx512Bf16::attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Avx512Bf16::attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Avx512Bf16::attention_scores(const float* q, const bf16_t* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Avx512Bf16::attention_values(const float* p, const bf16_t* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Avx512Bf16::attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  impl::attention_prepare_queries(q, nq, d, buf);
}
void Avx512Bf16::attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n,
                                           int d, float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Avx512Bf16::attention_scores_prepared(const float* buf, int nq, const bf16_t* k, std::size_t ldk, const int* n,
                                           int d, float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Avx512Bf16::attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,
                                        int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Avx512Bf16::attention_values_multi(const float* const* p, int nq, const bf16_t* v, std::size_t ldv, int n,
                                        int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Avx512Bf16::add(const float* x, float* y, int n) { impl::add(x, y, n); }
void Avx512Bf16::rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
  impl::rmsnorm(x, w, y, n, eps);
}
void Avx512Bf16::softmax(float* x, int n) { impl::softmax(x, n); }
void Avx512Bf16::silu_mul(const float* gate, const float* up, float* out, int n) { impl::silu_mul(gate, up, out, n); }
void Avx512Bf16::rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  impl::rope_rotate_half(x, cos, sin, head_dim);
}

}  // namespace mi::kernels

#pragma GCC diagnostic pop
