#include "kernels/scalar/scalar.h"

#include <cmath>

namespace mi::kernels {

namespace {
inline float widen(float v) { return v; }
inline float widen(bf16_t v) { return bf16_to_f32(v); }

template <class W, class X>
void matvec_impl(const W* w, std::size_t ld, const X* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const W* row = w + std::size_t(r) * ld;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += widen(row[c]) * widen(x[c]);
    y[r] = acc;
  }
}

template <class W, class X>
void matmul_impl(const W* w, std::size_t ld, const X* x, std::size_t ldx, float* y, std::size_t ldy, int M,
                 int rows, int cols) {
  for (int m = 0; m < M; ++m) matvec_impl(w, ld, x + std::size_t(m) * ldx, y + std::size_t(m) * ldy, rows, cols);
}
}  // namespace

void Scalar::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  matvec_impl(W, ld, x, y, rows, cols);
}
void Scalar::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  matvec_impl(W, ld, x, y, rows, cols);
}
void Scalar::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  matvec_impl(W, ld, x, y, rows, cols);
}
void Scalar::matmul(const bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                    int M, int rows, int cols) {
  matmul_impl(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Scalar::matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy,
                    int M, int rows, int cols) {
  matmul_impl(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Scalar::matmul_fast(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y,
                         std::size_t ldy, int M, int rows, int cols) {
  matmul_impl(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Scalar::to_bf16(const float* x, bf16_t* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}
float Scalar::dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}
void Scalar::axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
// Keys / values f32 or bf16 (widened exactly), one explicit FMA per element: a bf16 row gives the f32 result of its
// widened row whatever the compiler's contraction (engines build this level with -mfma, where GCC fused one
// instantiation's `acc += a * b` and not the other's).
namespace {
template <class E>
void scores_impl(const float* q, const E* k, std::size_t ldk, int n, int d, float scale, float* s) {
  for (int j = 0; j < n; ++j) {
    const E* kj = k + std::size_t(j) * ldk;
    float acc = 0.0f;
    for (int i = 0; i < d; ++i) acc = std::fma(q[i], widen(kj[i]), acc);
    s[j] = acc * scale;
  }
}
template <class E>
void values_impl(const float* p, const E* v, std::size_t ldv, int n, int d, float* out) {
  for (int j = 0; j < n; ++j) {
    const E* vj = v + std::size_t(j) * ldv;
    for (int i = 0; i < d; ++i) out[i] = std::fma(p[j], widen(vj[i]), out[i]);
  }
}
}  // namespace
void Scalar::attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale, float* s) {
  scores_impl(q, k, ldk, n, d, scale, s);
}
void Scalar::attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out) {
  values_impl(p, v, ldv, n, d, out);
}
void Scalar::attention_scores(const float* q, const bf16_t* k, std::size_t ldk, int n, int d, float scale, float* s) {
  scores_impl(q, k, ldk, n, d, scale, s);
}
void Scalar::attention_values(const float* p, const bf16_t* v, std::size_t ldv, int n, int d, float* out) {
  values_impl(p, v, ldv, n, d, out);
}
// Query blocks kept as rows and scored (and summed) one query at a time (kernel_api.h).
void Scalar::attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  prepare_query_rows(q, nq, d, buf);
}
void Scalar::attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n, int d,
                                       float scale, float* const* s) {
  attention_scores_prepared_by_query<Scalar>(buf, nq, k, ldk, n, d, scale, s);
}
void Scalar::attention_scores_prepared(const float* buf, int nq, const bf16_t* k, std::size_t ldk, const int* n, int d,
                                       float scale, float* const* s) {
  attention_scores_prepared_by_query<Scalar>(buf, nq, k, ldk, n, d, scale, s);
}
void Scalar::attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,
                                    int d, float* const* out) {
  attention_values_by_query<Scalar>(p, nq, v, ldv, n, d, out);
}
void Scalar::attention_values_multi(const float* const* p, int nq, const bf16_t* v, std::size_t ldv, int n,
                                    int d, float* const* out) {
  attention_values_by_query<Scalar>(p, nq, v, ldv, n, d, out);
}
void Scalar::add(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += x[i];
}
void Scalar::rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
  float sum_sq = 0.0f;
  for (int i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sum_sq / float(n) + eps);
  for (int i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv_rms);
}
void Scalar::softmax(float* x, int n) {
  float max_v = x[0];
  for (int i = 1; i < n; ++i) max_v = std::fmax(max_v, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_v);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}
void Scalar::silu_mul(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
void Scalar::rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace mi::kernels
