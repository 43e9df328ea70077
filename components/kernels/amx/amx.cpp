// The AMX level: everything but the many-token matmuls is the avx512bf16 level's code (kernels/avx512/
// avx512_impl.h and kernels/avx512bf16/bf16_dot_impl.h, compiled here again with this level's flags).
//
// Many-token matmul Y[M, rows] = X[M, cols] W[rows, cols]^T on the tile unit (Intel SDM, TDPBF16PS; Intel
// Intrinsics Guide for _tile_*). TDPBF16PS C[m][n] += sum_k A[m][2k] B[k][2n] + A[m][2k+1] B[k][2n+1] over tiles of
// 16 rows x 64 bytes. We take A = 16 weight rows x 32 columns, loaded straight from the row-major checkpoint
// weights (no packing of the weights at all), and B = 32 columns x 16 tokens in pair-interleaved form:
// B[k][2n+e] = X[token n][column 2k+e], i.e. the transpose of a 16 x 16 matrix of 32-bit bf16 pairs, packed once
// per block of tokens. C is then Y^T for 16 weight rows x 16 tokens.
// Blocking: 32 tokens (two B tiles) x 32 weight rows (two A tiles) -> four C tiles, 8 tiles in all; columns in
// chunks of kKC so the packed activations (3 bf16 terms in precise mode, 32 tokens) stay in L2.
#include "kernels/amx/amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/amx_unavailable.h"
#include "kernels/avx512/avx512_impl.h"
#include "kernels/avx512bf16/bf16_dot_impl.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positive in its own headers (GCC bug 105593)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mi::kernels {
namespace {
namespace impl = avx512_impl;
using std::size_t;

// Linux x86 arch_prctl codes (arch/x86/include/uapi/asm/prctl.h) and the XSAVE feature number of AMX tile data.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool request_amx_permission() noexcept {
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("amx-tile") ||
      !__builtin_cpu_supports("amx-bf16"))
    return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Tokens from which matmul uses the tile unit. Up to 8 tokens (a batched decode step) take the avx512 levels'
// one-pass dot form, whose rows equal the lone matvec bitwise: a sequence's logits then do not depend on what it is
// batched with (tests/unit/kernels/matmul_test.cpp), and those steps are bandwidth-bound anyway.
constexpr int kMinTokensForTiles = 9;
// Columns per packed chunk: 32 tokens x 1024 columns x 3 terms x bf16 = 192 KiB on the stack. A tuning parameter
// (ckb/platforms/x86-64-amx.toml [[tuning]] MI_TUNE_TILE_KC).
#ifndef MI_TUNE_TILE_KC
#define MI_TUNE_TILE_KC 1024
#endif
static_assert(MI_TUNE_TILE_KC % 32 == 0 && MI_TUNE_TILE_KC >= 32 && MI_TUNE_TILE_KC <= 4096, "MI_TUNE_TILE_KC");
constexpr int kKC = MI_TUNE_TILE_KC;

// Tile configuration (Intel SDM vol. 1, 3.2 "TILECFG"): palette 1, every tile 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette_id = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// Every tile 16 rows x 64 bytes. Loaded at the start of each tile matmul and released at its end (plain calls, not
// an RAII guard: nothing in between throws, and a destructor would compile an exception path into this object).
inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// Tiles: C[a][b] = tmm(2a + b) for weight-row tile a and token tile b; A tiles tmm4, tmm5; B tiles tmm6, tmm7.
constexpr int kTileBytes = 1024;  // 16 rows x 64 bytes

// Pack 16 tokens x 32 columns of X (rows x + n * ldx, columns [c, c + 32), masked to `valid_cols`; tokens beyond
// `valid_tokens` are zero) into B form, as the three bf16 terms of each f32 value: hi = bf16(x), mid = bf16(x - hi),
// lo = bf16(x - hi - mid). Each bf16 holds 8 significant bits and both differences are exact in f32, so
// hi + mid + lo == x (24 bits) unless lo falls below the bf16 normal range (|x| < ~2^-110, flushed by TDPBF16PS):
// the tile products are then the exact f32 products the kernel contract's precise mode requires.
inline void pack_b(const float* x, size_t ldx, int valid_tokens, int valid_cols, bf16_t* const out[3]) {
  const __mmask16 m0 = impl::mask16(valid_cols), m1 = impl::mask16(valid_cols - 16);
  __m512 t[3][16];
  for (int n = 0; n < 16; ++n) {
    __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
    if (n < valid_tokens) {
      x0 = _mm512_maskz_loadu_ps(m0, x + size_t(n) * ldx);
      x1 = _mm512_maskz_loadu_ps(m1, x + size_t(n) * ldx + 16);
    }
    for (int term = 0; term < 3; ++term) {
      const __m512i b = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);  // elements 0..15 from x0, 16..31 from x1, RNE
      t[term][n] = _mm512_castsi512_ps(b);
      x0 = _mm512_sub_ps(x0, impl::widen_bf16(_mm512_castsi512_si256(b)));
      x1 = _mm512_sub_ps(x1, impl::widen_bf16(_mm512_extracti64x4_epi64(b, 1)));
    }
  }
  for (int term = 0; term < 3; ++term) {
    impl::transpose16x16(t[term]);  // row k lane n = pair k of token n
    for (int k = 0; k < 16; ++k) _mm512_store_ps(reinterpret_cast<float*>(out[term]) + 16 * k, t[term][k]);
  }
}
inline void pack_b(const bf16_t* x, size_t ldx, int valid_tokens, int valid_cols, bf16_t* const out[1]) {
  const __mmask32 m = impl::mask32(valid_cols);
  __m512 h[16];
  for (int n = 0; n < 16; ++n)
    h[n] = n < valid_tokens ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, x + size_t(n) * ldx))
                            : _mm512_setzero_ps();
  impl::transpose16x16(h);
  for (int k = 0; k < 16; ++k) _mm512_store_ps(reinterpret_cast<float*>(out[0]) + 16 * k, h[k]);
}

// A tile source for weight rows [r, r + 16) and columns [c, c + 32): the weights themselves when all of it lies
// inside the matrix, else a zero-padded copy in `pad` (so nothing past the matrix is read: a NaN there times a
// zero activation would still be NaN).
inline const bf16_t* a_source(const bf16_t* w, size_t ld, int r, int rows, int c, int cols, bf16_t* pad,
                              size_t& stride) {
  if (r + 16 <= rows && c + 32 <= cols) {
    stride = ld * sizeof(bf16_t);
    return w + size_t(r) * ld + c;
  }
  const __mmask32 m = impl::mask32(cols - c);
  for (int i = 0; i < 16; ++i)
    _mm512_store_si512(pad + 32 * i, r + i < rows ? _mm512_maskz_loadu_epi16(m, w + size_t(r + i) * ld + c)
                                                  : _mm512_setzero_si512());
  stride = 64;
  return pad;
}

// One block: up to 32 weight rows (NA tiles) x up to 32 tokens (NB tiles), columns [0, kc) of the packed chunk.
// B tiles of column block kb, token tile b, term i: at b_terms[i] + (kb * NB + b) * 512 elements.
template <int NA, int NB, int kTerms>
inline void tile_block(const bf16_t* w, size_t ld, int r0, int rows, int k0, int cols, int kc,
                       bf16_t* const b_terms[], float* c_out /* [32 rows][32 tokens] */) {
  alignas(64) bf16_t pad[2][512];
  _tile_zero(0);
  if constexpr (NB == 2) _tile_zero(1);
  if constexpr (NA == 2) {
    _tile_zero(2);
    if constexpr (NB == 2) _tile_zero(3);
  }
  const int nkb = (kc + 31) / 32;
  for (int kb = 0; kb < nkb; ++kb) {
    const int c = k0 + 32 * kb;
    size_t s0 = 0, s1 = 0;
    _tile_loadd(4, a_source(w, ld, r0, rows, c, cols, pad[0], s0), s0);
    if constexpr (NA == 2) _tile_loadd(5, a_source(w, ld, r0 + 16, rows, c, cols, pad[1], s1), s1);
    for (int term = 0; term < kTerms; ++term) {
      const bf16_t* b = b_terms[term] + size_t(kb) * NB * 512;
      _tile_loadd(6, b, 64);
      if constexpr (NB == 2) _tile_loadd(7, b + 512, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NB == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (NA == 2) {
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (NB == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  // C[a][b] rows = weight rows, columns = tokens: c_out[(16a + i) * 32 + 16b + j]
  _tile_stored(0, c_out, 32 * sizeof(float));
  if constexpr (NB == 2) _tile_stored(1, c_out + 16, 32 * sizeof(float));
  if constexpr (NA == 2) {
    _tile_stored(2, c_out + 16 * 32, 32 * sizeof(float));
    if constexpr (NB == 2) _tile_stored(3, c_out + 16 * 32 + 16, 32 * sizeof(float));
  }
}

template <class X>
void tile_matmul(const bf16_t* w, size_t ld, const X* x, size_t ldx, float* y, size_t ldy, int M, int rows,
                 int cols) {
  constexpr int kTerms = std::is_same_v<X, float> ? 3 : 1;  // f32 activations as hi + mid + lo, bf16 as they are
  constexpr size_t kTermElems = 2 * (kKC / 32) * 512;      // 2 token tiles x kKC / 32 column blocks
  configure_tiles();
  alignas(64) bf16_t packed[kTerms * kTermElems];
  bf16_t* b_terms[kTerms];
  for (int i = 0; i < kTerms; ++i) b_terms[i] = packed + i * kTermElems;
  alignas(64) float c[32 * 32];
  for (int m0 = 0; m0 < M; m0 += 32) {
    const int mt = M - m0 < 32 ? M - m0 : 32;
    const int nb = mt > 16 ? 2 : 1;
    for (int k0 = 0; k0 < cols; k0 += kKC) {
      const int kc = cols - k0 < kKC ? cols - k0 : kKC;
      const int nkb = (kc + 31) / 32;
      for (int kb = 0; kb < nkb; ++kb)
        for (int b = 0; b < nb; ++b) {
          const size_t at = (size_t(kb) * nb + b) * 512;
          bf16_t* dst[kTerms];
          for (int i = 0; i < kTerms; ++i) dst[i] = b_terms[i] + at;
          pack_b(x + size_t(m0 + 16 * b) * ldx + k0 + 32 * kb, ldx, mt - 16 * b, kc - 32 * kb, dst);
        }
      for (int r0 = 0; r0 < rows; r0 += 32) {
        const int nr = rows - r0 < 32 ? rows - r0 : 32;
        const bool two_a = nr > 16;
        if (nb == 2) {
          if (two_a) tile_block<2, 2, kTerms>(w, ld, r0, rows, k0, cols, kc, b_terms, c);
          else tile_block<1, 2, kTerms>(w, ld, r0, rows, k0, cols, kc, b_terms, c);
        } else {
          if (two_a) tile_block<2, 1, kTerms>(w, ld, r0, rows, k0, cols, kc, b_terms, c);
          else tile_block<1, 1, kTerms>(w, ld, r0, rows, k0, cols, kc, b_terms, c);
        }
        // Y[m0 + t][r0 + r] (=, then += for later column chunks) from c[r][t].
        for (int t = 0; t < mt; ++t) {
          float* yr = y + size_t(m0 + t) * ldy + r0;
          for (int r = 0; r < nr; ++r) yr[r] = k0 == 0 ? c[r * 32 + t] : yr[r] + c[r * 32 + t];
        }
      }
    }
  }
  _tile_release();
}

void check_available() {
  if (!Amx::available()) fail_amx_unavailable();
}
}  // namespace

// 0 = not asked yet, 1 = granted, 2 = refused. A plain atomic rather than a function-local static: the request is
// idempotent, so a race only repeats it, and no guard (with its exception path) is compiled into this object.
std::atomic<int> g_amx_state{0};

bool Amx::available() {
  int state = g_amx_state.load(std::memory_order_acquire);
  if (state == 0) {
    state = request_amx_permission() ? 1 : 2;
    g_amx_state.store(state, std::memory_order_release);
  }
  return state == 1;
}

void Amx::matvec(const bf16_t* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Amx::matvec(const float* W, std::size_t ld, const float* x, float* y, int rows, int cols) {
  impl::matvec(W, ld, x, y, rows, cols);
}
void Amx::matvec_fast(const bf16_t* W, std::size_t ld, const bf16_t* x, float* y, int rows, int cols) {
  impl::dot_rows_tokens<bf16_dot_impl::DpBf16>(W, ld, x, 0, y, 0, 1, rows, cols);
}
void Amx::matmul(const bf16_t* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy, int M,
                 int rows, int cols) {
  if (M < kMinTokensForTiles || rows <= 0 || cols <= 0) return impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
  check_available();
  tile_matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Amx::matmul(const float* W, std::size_t ld, const float* X, std::size_t ldx, float* Y, std::size_t ldy, int M,
                 int rows, int cols) {
  impl::matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);  // f32 weights: the tile unit has no f32 multiply
}
void Amx::matmul_fast(const bf16_t* W, std::size_t ld, const bf16_t* X, std::size_t ldx, float* Y, std::size_t ldy,
                      int M, int rows, int cols) {
  if (M < kMinTokensForTiles || rows <= 0 || cols <= 0)
    return bf16_dot_impl::matmul_fast_few(W, ld, X, ldx, Y, ldy, M, rows, cols);
  check_available();
  tile_matmul(W, ld, X, ldx, Y, ldy, M, rows, cols);
}
void Amx::to_bf16(const float* x, bf16_t* y, int n) { impl::to_bf16(x, y, n); }
float Amx::dot(const float* a, const float* b, int n) { return impl::dot(a, b, n); }
void Amx::axpy(float a, const float* x, float* y, int n) { impl::axpy(a, x, y, n); }
void Amx::attention_scores(const float* q, const float* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Amx::attention_values(const float* p, const float* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Amx::attention_scores(const float* q, const bf16_t* k, std::size_t ldk, int n, int d, float scale,
                              float* s) {
  impl::attention_scores(q, k, ldk, n, d, scale, s);
}
void Amx::attention_values(const float* p, const bf16_t* v, std::size_t ldv, int n, int d, float* out) {
  impl::attention_values(p, v, ldv, n, d, out);
}
void Amx::attention_prepare_queries(const float* const* q, int nq, int d, float* buf) {
  impl::attention_prepare_queries(q, nq, d, buf);
}
void Amx::attention_scores_prepared(const float* buf, int nq, const float* k, std::size_t ldk, const int* n, int d,
                                    float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Amx::attention_scores_prepared(const float* buf, int nq, const bf16_t* k, std::size_t ldk, const int* n, int d,
                                    float scale, float* const* s) {
  impl::attention_scores_prepared(buf, nq, k, ldk, n, d, scale, s);
}
void Amx::attention_values_multi(const float* const* p, int nq, const float* v, std::size_t ldv, int n,
                                 int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Amx::attention_values_multi(const float* const* p, int nq, const bf16_t* v, std::size_t ldv, int n,
                                 int d, float* const* out) {
  impl::attention_values_multi(p, nq, v, ldv, n, d, out);
}
void Amx::add(const float* x, float* y, int n) { impl::add(x, y, n); }
void Amx::rmsnorm(const float* x, const float* w, float* y, int n, float eps) { impl::rmsnorm(x, w, y, n, eps); }
void Amx::softmax(float* x, int n) { impl::softmax(x, n); }
void Amx::silu_mul(const float* gate, const float* up, float* out, int n) { impl::silu_mul(gate, up, out, n); }
void Amx::rope_rotate_half(float* x, const float* cos, const float* sin, int head_dim) {
  impl::rope_rotate_half(x, cos, sin, head_dim);
}

}  // namespace mi::kernels

#pragma GCC diagnostic pop
