// The kernel contract (ckb/contracts/kernels.toml): every x86 level is a struct with exactly these static
// functions, so model components are templates over a level (`template <class K>`) and a generated engine fixes
// K at build time. The scalar level is the oracle every other level is tested against.
//
// Conventions, shared by all levels:
//   - Weight matrices are row-major [rows, cols] with a row stride `ld` (elements), stored as bf16 or f32, exactly
//     as in the checkpoint (memory-mapped; kernels never copy them), or int8 with one f32 scale per row when the
//     engine quantises its weights at load (platform.dtype = "int8", ckb/contracts/int8_weights.toml).
//   - Kernels are single-threaded over the row range they are given; runtime/thread_pool.h splits rows.
//   - "precise" kernels take f32 activations and accumulate in f32. "fast" kernels take bf16 activations (the
//     caller rounds with to_bf16) and may use the platform's bf16 dot-product instructions; accumulation stays f32.
//   - No allocation, no threads, no I/O inside a kernel.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/bf16.h"

#define MI_KERNEL_API                                                                                             \
  /* y[r] = sum_c W[r, c] * x[c] for r in [0, rows) */                                                            \
  static void matvec(const ::mi::bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols);       \
  static void matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols);              \
  /* fast mode: bf16 activations */                                                                               \
  static void matvec_fast(const ::mi::bf16_t* W, std::size_t ld, const ::mi::bf16_t* x, float* y, int rows,     \
                          int cols);                                                                              \
  /* Y[m, r] = sum_c X[m, c] * W[r, c] for m in [0, M), r in [0, rows); X row stride ldx, Y row stride ldy */     \
  static void matmul(const ::mi::bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y,          \
                     std::size_t ldy, int M, int rows, int cols);                                                 \
  static void matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy, \
                     int M, int rows, int cols);                                                                  \
  static void matmul_fast(const ::mi::bf16_t* W, std::size_t ld, const ::mi::bf16_t* X, std::size_t ldx,        \
                          float* Y, std::size_t ldy, int M, int rows, int cols);                                  \
  /* int8 weights (ckb/contracts/int8_weights.toml): Q [rows, cols] int8 row-major (stride ld), one f32 scale per  \
     row; y[r] = scale[r] * (sum_c Q[r, c] * x[c]), products and sum in f32. Quantised at load, so not mapped. */  \
  static void matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows,     \
                     int cols);                                                                                   \
  /* Y[m, r] = scale[r] * sum_c X[m, c] * Q[r, c] */                                                              \
  static void matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx,       \
                     float* Y, std::size_t ldy, int M, int rows, int cols);                                       \
  /* y[i] = round_to_nearest_even_bf16(x[i]) */                                                                   \
  static void to_bf16(const float* x, ::mi::bf16_t* y, int n);                                                    \
  /* sum_i a[i] * b[i] */                                                                                         \
  static float dot(const float* a, const float* b, int n);                                                        \
  /* y[i] += a * x[i] */                                                                                          \
  static void axpy(float a, const float* x, float* y, int n);                                                     \
  /* attention over one head, keys/values contiguous rows (stride ldk / ldv elements), d = head_dim:            \
     s[j] = scale * sum_i q[i] * k[j*ldk + i] for j < n */                                                      \
  static void attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale,      \
                               float* s);                                                                       \
  /* out[i] += sum_j p[j] * v[j*ldv + i] for i < d */                                                            \
  static void attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out);     \
  /* the same over a bf16 KV cache (fast numerics): each key / value widened to f32 exactly, then the f32        \
     kernel's operations in its order, so the result equals the f32 kernel on the widened rows bitwise */        \
  static void attention_scores(const float* q, const ::mi::bf16_t* k, std::size_t ldk, int n, int d,            \
                               float scale, float* s);                                                          \
  static void attention_values(const float* p, const ::mi::bf16_t* v, std::size_t ldv, int n, int d,            \
                               float* out);                                                                     \
  /* A query block (a prefill's, nq <= kAttentionPreparedMaxQueries): prepare_queries lays the queries out once   \
     in buf (kAttentionPreparedMaxQueries * d floats whatever nq, d <= kAttentionPreparedMaxHeadDim; the layout   \
     is the level's own); then for each span of keys, scores_prepared gives query i the first n[i] keys (0: none): \
     s[i][j] for j < n[i] exactly as attention_scores(q[i], k, ldk, n[i], d, scale, s[i]). values_multi: nq       \
     queries over the same n rows, out[i] as attention_values(p[i], ...) gives, bitwise; levels may share each     \
     loaded value row between the queries. The rows s[i] (and out[i]) of different queries must not overlap: a    \
     level may compute several before storing any. */                                                            \
  static void attention_prepare_queries(const float* const* q, int nq, int d, float* buf);                     \
  static void attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n, \
                                        int d, float scale, float* const* s);                                    \
  static void attention_scores_prepared(const float* buf, int nq, const ::mi::bf16_t* k, std::size_t ldk,       \
                                        const int* n, int d, float scale, float* const* s);                      \
  static void attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,     \
                                     int d, float* const* out);                                                  \
  static void attention_values_multi(const float* const* p, int nq, const ::mi::bf16_t* v, std::size_t ldv,     \
                                     int n, int d, float* const* out);                                           \
  /* y[i] += x[i] */                                                                                              \
  static void add(const float* x, float* y, int n);                                                               \
  /* y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]   (HF LlamaRMSNorm / Qwen3RMSNorm, computed in f32) */            \
  static void rmsnorm(const float* x, const float* w, float* y, int n, float eps);                                \
  /* x[i] = exp(x[i] - max) / sum_j exp(x[j] - max) */                                                            \
  static void softmax(float* x, int n);                                                                           \
  /* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) */                                              \
  static void silu_mul(const float* gate, const float* up, float* out, int n);                                   \
  /* rotate-half RoPE on one head (HF apply_rotary_pos_emb): for i < d/2 with d = head_dim,                       \
     x'[i] = x[i]*cos[i] - x[i+d/2]*sin[i],  x'[i+d/2] = x[i+d/2]*cos[i] + x[i]*sin[i]; cos/sin have d/2 entries */ \
  static void rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim);

namespace mi::kernels {
// Query blocks for attention_prepare_queries / attention_scores_prepared: at most this many queries; the caller's
// buffer holds kAttentionPreparedMaxQueries * d floats. Head dims above kAttentionPreparedMaxHeadDim are accepted
// (every level keeps them as rows); model/attention.h sizes its stack buffer by the limit and sends larger heads to
// the one-query kernel.
constexpr int kAttentionPreparedMaxQueries = 16;
constexpr int kAttentionPreparedMaxHeadDim = 512;

// The prepared-query functions of a level that keeps the queries as rows (buf[i * d + c] = q[i][c]) and scores them
// one at a time, which is bitwise what the API asks of them. Internal linkage: the levels' translation units are
// compiled for different instruction sets, and one out-of-line copy must not serve them all (avx512_impl.h).
namespace {
inline void prepare_query_rows(const float* const* q, int nq, int d, float* buf) {
  for (int i = 0; i < nq; ++i)
    for (int c = 0; c < d; ++c) buf[std::size_t(i) * std::size_t(d) + std::size_t(c)] = q[i][c];
}
}  // namespace
template <class K, class E>
void attention_scores_prepared_by_query(const float* buf, int nq, const E* k, std::size_t ldk, const int* n, int d,
                                        float scale, float* const* s) {
  for (int i = 0; i < nq; ++i)
    if (n[i] > 0) K::attention_scores(buf + std::size_t(i) * std::size_t(d), k, ldk, n[i], d, scale, s[i]);
}
// The multi-query values function of a level that has no multi-query form: one query at a time.
template <class K, class E>
void attention_values_by_query(const float* const* p, int nq, const E* v, std::size_t ldv, int n, int d,
                               float* const* out) {
  for (int i = 0; i < nq; ++i) K::attention_values(p[i], v, ldv, n, d, out[i]);
}

// Instruction-set levels, as named in ckb/platforms and in a constraints file's platform.
enum class Level { scalar, avx2, avx512, avx512bf16, amx };
}  // namespace mi::kernels
