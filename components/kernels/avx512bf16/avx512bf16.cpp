// The AVX-512 BF16 level: precise kernels and element-wise ops are the avx512 ones (kernels/avx512/avx512_impl.h,
// compiled here again with this level's flags); the fast matvec/matmul use VDPBF16PS (_mm512_dpbf16_ps):
// lane i += a[2i]*b[2i] + a[2i+1]*b[2i+1], so one instruction does 32 bf16 multiply-adds into 16 f32 lanes.
#include "kernels/avx512bf16/avx512bf16.h"

#include "kernels/avx512/avx512_impl.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in its own headers (GCC bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace mi::kernels {
namespace {
namespace impl = avx512_impl;
using std::size_t;

// 32 bf16 values (16 pairs) as the operand type of VDPBF16PS; masked-off elements read as +0.
inline __m512bh load32(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load32(const bf16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// Decode: R weight rows x T tokens, 2*R*T accumulators over 64-column steps (see impl::dot_block).
template <int R, int T>
inline void dp_block(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int cols) {
  __m512 acc0[T][R], acc1[T][R];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) acc0[t][r] = acc1[t][r] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 64 <= cols; c += 64) {
    __m512bh x0[T], x1[T];
    for (int t = 0; t < T; ++t) {
      x0[t] = load32(x + t * ldx + c);
      x1[t] = load32(x + t * ldx + c + 32);
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh w0 = load32(w + r * ld + c), w1 = load32(w + r * ld + c + 32);
      for (int t = 0; t < T; ++t) {
        acc0[t][r] = _mm512_dpbf16_ps(acc0[t][r], w0, x0[t]);
        acc1[t][r] = _mm512_dpbf16_ps(acc1[t][r], w1, x1[t]);
      }
    }
  }
  for (; c < cols; c += 32) {  // at most two masked steps
    const __mmask32 m = impl::mask32(cols - c);
    __m512bh x0[T];
    for (int t = 0; t < T; ++t) x0[t] = load32(x + t * ldx + c, m);
    for (int r = 0; r < R; ++r) {
      const __m512bh w0 = load32(w + r * ld + c, m);
      for (int t = 0; t < T; ++t) acc0[t][r] = _mm512_dpbf16_ps(acc0[t][r], w0, x0[t]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t][r], acc1[t][r]));
}

template <int T>
inline void dp_rows(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int rows,
                    int cols) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) dp_block<4, T>(w + size_t(r) * ld, ld, x, ldx, y + r, ldy, cols);
  for (; r < rows; ++r) dp_block<1, T>(w + size_t(r) * ld, ld, x, ldx, y + r, ldy, cols);
}

// Prefill: as impl::matmul, but the packed panel holds bf16 pairs: panel[p*32 + r] = (W[r, 2p], W[r, 2p+1]) as one
// 32-bit lane (low half = even column, the element order VDPBF16PS pairs up), and each token's (x[2p], x[2p+1])
// is broadcast straight from X, so neither operand is widened. A zero-padded last pair covers odd kc.
inline void pack_pairs(const bf16_t* w, size_t ld, int nr, int kc, uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  for (int g = 0; g < 2; ++g) {
    const int r0 = 16 * g;
    for (int p = 0; p < pairs; p += 16) {
      const __mmask32 km = impl::mask32(kc - 2 * p);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] = r0 + i < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(km, w + size_t(r0 + i) * ld + 2 * p))
                           : _mm512_setzero_ps();
      impl::transpose16x16(t);
      const int pn = pairs - p < 16 ? pairs - p : 16;
      for (int j = 0; j < pn; ++j)
        _mm512_store_si512(dst + size_t(p + j) * impl::kNR + r0, _mm512_castps_si512(t[j]));
    }
  }
}

inline uint32_t load_pair(const bf16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int MR>
inline void micro_dp(const uint32_t* panel, const bf16_t* x, size_t ldx, int kc, float* y, size_t ldy,
                     __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  const int full_pairs = kc / 2;
  for (int p = 0; p < full_pairs; ++p) {
    const __m512bh w0 = (__m512bh)_mm512_load_si512(panel + size_t(p) * impl::kNR);
    const __m512bh w1 = (__m512bh)_mm512_load_si512(panel + size_t(p) * impl::kNR + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(load_pair(x + i * ldx + 2 * p)));
      c0[i] = _mm512_dpbf16_ps(c0[i], w0, xb);
      c1[i] = _mm512_dpbf16_ps(c1[i], w1, xb);
    }
  }
  if (kc & 1) {  // last column alone: the pair's upper half is 0 in the panel and in x (never read past the row)
    const __m512bh w0 = (__m512bh)_mm512_load_si512(panel + size_t(full_pairs) * impl::kNR);
    const __m512bh w1 = (__m512bh)_mm512_load_si512(panel + size_t(full_pairs) * impl::kNR + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(int(x[i * ldx + kc - 1].bits));
      c0[i] = _mm512_dpbf16_ps(c0[i], w0, xb);
      c1[i] = _mm512_dpbf16_ps(c1[i], w1, xb);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    if (accumulate) {
      c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, yi));
      c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, yi + 16));
    }
    _mm512_mask_storeu_ps(yi, m0, c0[i]);
    _mm512_mask_storeu_ps(yi + 16, m1, c1[i]);
  }
}

inline void micro_dp_dispatch(int mr, const uint32_t* panel, const bf16_t* x, size_t ldx, int kc, float* y,
                              size_t ldy, __mmask16 m0, __mmask16 m1, bool accumulate) {
  switch (mr) {
#define MI_MICRO_CASE(n) \
  case n: micro_dp<n>(panel, x, ldx, kc, y, ldy, m0, m1, accumulate); break;
    MI_MICRO_CASE(1) MI_MICRO_CASE(2) MI_MICRO_CASE(3) MI_MICRO_CASE(4) MI_MICRO_CASE(5) MI_MICRO_CASE(6)
    MI_MICRO_CASE(7) MI_MICRO_CASE(8) MI_MICRO_CASE(9) MI_MICRO_CASE(10) MI_MICRO_CASE(11) MI_MICRO_CASE(12)
#undef MI_MICRO_CASE
    default: break;
  }
}

// Stack use: 16 KiB packed panel.
void matmul_dp(const bf16_t* w, size_t ld, const bf16_t* x, size_t ldx, float* y, size_t ldy, int M, int rows,
               int cols) {
  if (M <= 0 || rows <= 0) return;
  if (cols <= 0) return impl::zero_outputs(y, ldy, M, rows);
  if (M < impl::kMinTokensForBlocking) {
    int m = 0;
    for (; m + 3 <= M; m += 3) dp_rows<3>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
    if (M - m == 2) dp_rows<2>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
    if (M - m == 1) dp_rows<1>(w, ld, x + size_t(m) * ldx, ldx, y + size_t(m) * ldy, ldy, rows, cols);
    return;
  }
  alignas(64) uint32_t panel[(impl::kKC / 2) * impl::kNR];
  for (int m0 = 0; m0 < M; m0 += impl::kMC) {
    const int mc = M - m0 < impl::kMC ? M - m0 : impl::kMC;
    for (int r0 = 0; r0 < rows; r0 += impl::kNR) {
      const int nr = rows - r0 < impl::kNR ? rows - r0 : impl::kNR;
      const __mmask16 rm0 = impl::mask16(nr), rm1 = impl::mask16(nr - 16);
      for (int k0 = 0; k0 < cols; k0 += impl::kKC) {
        const int kc = cols - k0 < impl::kKC ? cols - k0 : impl::kKC;
        pack_pairs(w + size_t(r0) * ld + k0, ld, nr, kc, panel);
        for (int i0 = 0; i0 < mc; i0 += impl::kMR) {
          const int mr = mc - i0 < impl::kMR ? mc - i0 : impl::kMR;
          micro_dp_dispatch(mr, panel, x + size_t(m0 + i0) * ldx + k0, ldx, kc, y + size_t(m0 + i0) * ldy + r0, ldy,
                            rm0, rm1, k0 > 0);
        }
      }
    }
  }
}
}  // namespace

void Avx512Bf16::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512Bf16::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Avx512Bf16::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  dp_rows<1>(W, ld, x, 0, y, 0, rows, cols);
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
  matmul_dp(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Avx512Bf16::to_bf16(const float* x, bf16_t* y, int n) { impl::to_bf16(x, y, n); }
float Avx512Bf16::dot(const float* a, const float* b, int n) { return impl::dot(a, b, n); }
void Avx512Bf16::axpy(float a, const float* x, float* y, int n) { impl::axpy(a, x, y, n); }
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
