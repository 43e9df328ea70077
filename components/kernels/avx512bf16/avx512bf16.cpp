// The AVX-512 BF16 level: precise kernels, fast decode (up to 8 tokens) and element-wise ops are the avx512 ones
// (kernels/avx512/avx512_impl.h, compiled here again with this level's flags); fast prefill (more than 8 tokens) uses
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
// Fast decode and batched decode (up to 8 tokens) widen both bf16 operands exactly and use the FMA dot forms of the
// avx512 level, not VDPBF16PS: on AMD Zen 5 (2 threads, 48 distinct matrices streamed, one accumulator per row and
// token) the FMA forms read 56-58 GB/s at one token against 43-49 for the VDPBF16PS form (impl::dot_rows with
// bf16_dot_impl::DpBf16), and at 8 tokens reach 173-217 GFLOP/s against 185-241: the batched step is bound by loads
// and memory, not by the multiply rate, so the pair instruction's 2x peak does not show. Products of bf16 values are
// exact in f32 either way; each token's row of a batched step is its lone matvec_fast bitwise (the dot forms'
// contract).
void Avx512Bf16::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
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
  if (M > impl::kMaxDotTokens && MI_TUNE_BF16_PREFILL == 1 && rows > 0 && cols > 0)
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
