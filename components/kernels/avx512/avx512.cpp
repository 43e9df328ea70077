// The AVX-512 level: thin entry points over kernels/avx512/avx512_impl.h (shared with the avx512bf16 level).
#include "kernels/avx512/avx512.h"

#include "kernels/avx512/avx512_impl.h"

namespace mi::kernels {

namespace impl = avx512_impl;

void Avx512::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512::matmul(const bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                    int M, int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512::matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                    int M, int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512::matmul_fast(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y,
                         std::size_t ldy, int M, int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512::to_bf16(const float* x, bf16_t* y, int n) { impl::to_bf16(x, y, n); }
float Avx512::dot(const float* a, const float* b, int n) { return impl::dot(a, b, n); }
void Avx512::axpy(float a, const float* x, float* y, int n) { impl::axpy(a, x, y, n); }
void Avx512::attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Avx512::attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Avx512::attention_scores(const float* q, const bf16_t* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Avx512::attention_values(const float* p, const bf16_t* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Avx512::attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  impl::attention_prepare_queries(q, nq, d, buf);
}
void Avx512::attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n, int d,
                                       float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Avx512::attention_scores_prepared(const float* buf, int nq, const bf16_t* k, std::size_t ldk, const int* n, int d,
                                       float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Avx512::attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,
                                    int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Avx512::attention_values_multi(const float* const* p, int nq, const bf16_t* v, std::size_t ldv, int n,
                                    int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Avx512::add(const float* x, float* y, int n) { impl::add(x, y, n); }
void Avx512::rmsnorm(const float* x, const float* w, float* y, int n, float eps) { impl::rmsnorm(x, w, y, n, eps); }
void Avx512::softmax(float* x, int n) { impl::softmax(x, n); }
void Avx512::silu_mul(const float* gate, const float* up, float* out, int n) { impl::silu_mul(gate, up, out, n); }
void Avx512::rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  impl::rope_rotate_half(x, cos, sin, head_dim);
}

}  // namespace mi::kernels
