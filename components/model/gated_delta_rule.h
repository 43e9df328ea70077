// The gated delta rule: the token mixer of Gated DeltaNet layers (Yang, Kautz, Hatamizadeh, "Gated Delta Networks:
// Improving Mamba2 with Delta Rule", ICLR 2025), per value head with a state S [dk, dv] in f32:
//   S_t = exp(g_t) S_{t-1}                               (gated decay, g_t <= 0 is the log decay)
//   S_t += k_t (beta_t (v_t - S_t^T k_t))^T              (delta rule: write beta * the prediction error)
//   o_t = S_t^T q_t
// i.e. S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T. q and k are L2-normalised per head (SUM of
// squares, experience rule BUG-005-1) and q is scaled by 1/sqrt(dk) before this function (l2_normalize_heads).
// Value head h reads key head h / (v_heads / k_heads) (value heads are grouped per key head, as the checkpoint's
// in_proj rows are).
//
// Two forms with the same result up to f32 rounding (tests/unit/model/gated_delta_rule_test.cpp):
//   - recurrent: one token at a time (decode); no scratch, one pass over the state per token.
//   - chunked (prefill): the chunkwise-parallel form of Yang et al. 2024, "Parallelizing Linear Transformers with the
//     Delta Rule over Sequence Length" (WY representation / UT transform), with the gates of Gated DeltaNet folded
//     in as cumulative decays. Derivation for one chunk of L tokens starting from state S0, G_t = sum_{s<=t} g_s:
//       S_t = exp(G_t) S0 + sum_{s<=t} exp(G_t - G_s) k_s d_s^T           (unrolling; d_s = the written delta)
//       d_t = beta_t (v_t - exp(G_t) S0^T k_t - sum_{s<t} exp(G_t - G_s) (k_t.k_s) d_s)
//     so (I + A) D = diag(beta) V - diag(beta exp(G)) K S0 with A[t,s] = beta_t exp(G_t - G_s) k_t.k_s (s < t),
//     strictly lower triangular. UT transform: T = (I + A)^{-1} (forward substitution),
//       U = T diag(beta) V,  W = T diag(beta exp(G)) K,  D = U - W S0,
//       O = diag(exp(G)) Q S0 + (mask_{s<=t} exp(G_t - G_s) Q K^T) D,
//       S_L = exp(G_{L-1}) S0 + sum_s exp(G_{L-1} - G_s) k_s d_s^T.
//     The state is touched once per chunk; everything else is L x L or L x d matrix work. Decays are always taken
//     as exp(G_t - G_s) with t >= s (<= 1), never as a ratio exp(G_t) / exp(G_s), which would overflow.
//
// Layouts (one sequence, T tokens; every row has its own stride so q/k/v can be views into one projection output):
//   q, k  [T, k_heads * dk]   rows ldq / ldk
//   v     [T, v_heads * dv]   row ldv
//   beta  [T, v_heads]        row v_heads, in (0, 1)
//   g     [T, v_heads]        row v_heads, <= 0
//   state [v_heads, dv, dk]   f32, S stored transposed per head: row j (value dim) holds S[:, j] over the key dims.
//                             Zeros at sequence start. Transposed because every quantity of a step is per value dim
//                             j: kv_j = S[:, j].k, delta_j, S[:, j] += delta_j k, o_j = S[:, j].q - so one decode
//                             step is one pass over the state, each row used while it sits in L1; and the chunked
//                             form's S0 products are plain row-major matmuls (K::matmul with S^T as the weight).
//   out   [T, v_heads * dv]   row ldo; must not alias q, k or v
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "runtime/thread_pool.h"

namespace mi::model {

struct GatedDeltaDims {
  int k_heads = 0;  // query/key heads
  int v_heads = 0;  // value heads, a multiple of k_heads
  int k_dim = 0;    // dk
  int v_dim = 0;    // dv
};

struct GatedDeltaInputs {
  const float* q = nullptr;  // [T, k_heads * dk], row stride ldq (normalised, scaled by 1/sqrt(dk))
  std::size_t ldq = 0;
  const float* k = nullptr;  // [T, k_heads * dk], row stride ldk (normalised)
  std::size_t ldk = 0;
  const float* v = nullptr;  // [T, v_heads * dv], row stride ldv
  std::size_t ldv = 0;
  const float* beta = nullptr;  // [T, v_heads]
  const float* g = nullptr;     // [T, v_heads]
};

// Floats of recurrent state per sequence and linear-attention layer: [v_heads, dv, dk].
inline std::size_t gated_delta_state_floats(const GatedDeltaDims& d) {
  return std::size_t(d.v_heads) * std::size_t(d.k_dim) * std::size_t(d.v_dim);
}

namespace detail {
inline void check_gated_delta_dims(const GatedDeltaDims& d) {
  if (d.k_heads <= 0 || d.v_heads <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.v_heads % d.k_heads != 0)
    fail("gated delta rule: v_heads (", d.v_heads, ") must be a positive multiple of k_heads (", d.k_heads,
         "), dims positive (dk ", d.k_dim, ", dv ", d.v_dim, ")");
}

// One recurrent step of one head. ST [dv, dk] (S transposed); q, k [dk]; v, o [dv]. One pass over the state:
// row j is decayed, read (kv_j), written (delta_j k) and read again (o_j) while it is in L1.
template <class K>
void gated_delta_step(float* ST, const float* q, const float* k, const float* v, float beta, float g, float* o,
                      int dk, int dv) {
  const float decay = std::exp(g);
  for (int j = 0; j < dv; ++j) {
    float* row = ST + std::size_t(j) * dk;
    for (int i = 0; i < dk; ++i) row[i] *= decay;
    const float delta = beta * (v[j] - K::dot(row, k, dk));  // the state's prediction error for value dim j
    K::axpy(delta, k, row, dk);
    o[j] = K::dot(row, q, dk);
  }
}
}  // namespace detail

// Recurrent form over T tokens of one sequence (decode: T = 1). Heads run in parallel.
template <class K>
void gated_delta_rule_recurrent(runtime::ThreadPool& pool, const GatedDeltaDims& d, const GatedDeltaInputs& in, int T,
                                float* state, float* out, std::size_t ldo) {
  detail::check_gated_delta_dims(d);
  const int group = d.v_heads / d.k_heads, dk = d.k_dim, dv = d.v_dim;
  const std::size_t head_state = std::size_t(dk) * std::size_t(dv);
  pool.parallel_for(d.v_heads, 1, [&](int h0, int h1) {
    for (int h = h0; h < h1; ++h) {
      const std::size_t kq_off = std::size_t(h / group) * dk, v_off = std::size_t(h) * dv;
      for (int t = 0; t < T; ++t)
        detail::gated_delta_step<K>(state + std::size_t(h) * head_state, in.q + std::size_t(t) * in.ldq + kq_off,
                                    in.k + std::size_t(t) * in.ldk + kq_off, in.v + std::size_t(t) * in.ldv + v_off,
                                    in.beta[std::size_t(t) * d.v_heads + h], in.g[std::size_t(t) * d.v_heads + h],
                                    out + std::size_t(t) * ldo + v_off, dk, dv);
    }
  });
}

// Batched decode: row b of the inputs is the one new token of a sequence whose state is states[b]
// ([v_heads, dv, dk] each); equals B recurrent calls with T = 1. One pool dispatch for all (row, head) pairs.
template <class K>
void gated_delta_rule_decode_batch(runtime::ThreadPool& pool, const GatedDeltaDims& d, const GatedDeltaInputs& in,
                                   int B, float* const* states, float* out, std::size_t ldo) {
  detail::check_gated_delta_dims(d);
  const int group = d.v_heads / d.k_heads, dk = d.k_dim, dv = d.v_dim;
  const std::size_t head_state = std::size_t(dk) * std::size_t(dv);
  pool.parallel_for(B * d.v_heads, 1, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      const int b = i / d.v_heads, h = i % d.v_heads;
      const std::size_t kq_off = std::size_t(h / group) * dk, v_off = std::size_t(h) * dv;
      detail::gated_delta_step<K>(states[b] + std::size_t(h) * head_state, in.q + std::size_t(b) * in.ldq + kq_off,
                                  in.k + std::size_t(b) * in.ldk + kq_off, in.v + std::size_t(b) * in.ldv + v_off,
                                  in.beta[std::size_t(b) * d.v_heads + h], in.g[std::size_t(b) * d.v_heads + h],
                                  out + std::size_t(b) * ldo + v_off, dk, dv);
    }
  });
}

// Scratch floats of one pool participant for a chunk of C tokens (see gated_delta_rule_chunked).
inline std::size_t gated_delta_chunk_floats(const GatedDeltaDims& d, int C) {
  const std::size_t c = std::size_t(C), dk = std::size_t(d.k_dim), dv = std::size_t(d.v_dim);
  auto round16 = [](std::size_t n) { return (n + 15) / 16 * 16; };  // keep every buffer 64-byte aligned
  return round16(c * dk) * 3 + round16(c * dv) * 2 + round16(c * c) * 2 + round16(c) * 3;
}
// Scratch for the whole call: one participant's share per pool thread.
inline std::size_t gated_delta_chunked_scratch_floats(const GatedDeltaDims& d, int C, int threads) {
  return std::size_t(threads) * gated_delta_chunk_floats(d, C);
}

// Chunked form over T tokens of one sequence (prefill), chunk size C (64 is a good default; T need not be a
// multiple). Continues from `state` and leaves it where the recurrent form would. Heads run in parallel, each
// walking its chunks in order. The products with the state and the L x L score matrices are K::matmul calls (f32
// weights = the state or the chunk's keys), the triangular parts are axpy rows.
//   scratch: gated_delta_chunked_scratch_floats(d, C, pool.size()) floats, 64-byte aligned
template <class K>
void gated_delta_rule_chunked(runtime::ThreadPool& pool, const GatedDeltaDims& d, const GatedDeltaInputs& in, int T,
                              int C, float* state, float* out, std::size_t ldo, float* scratch) {
  detail::check_gated_delta_dims(d);
  if (C <= 0) fail("gated delta rule: chunk size must be positive, got ", C);
  const int group = d.v_heads / d.k_heads, dk = d.k_dim, dv = d.v_dim;
  const std::size_t head_state = std::size_t(dk) * std::size_t(dv);
  const std::size_t per_thread = gated_delta_chunk_floats(d, C);
  auto round16 = [](std::size_t n) { return (n + 15) / 16 * 16; };
  const std::size_t uc = std::size_t(C), udk = std::size_t(dk), udv = std::size_t(dv);

  pool.parallel_chunks(d.v_heads, 1, [&](int part, int h0, int h1) {
    float* p = scratch + std::size_t(part) * per_thread;
    float* Kc = p;   p += round16(uc * udk);  // [C, dk] this chunk's keys (contiguous copy)
    float* Qc = p;   p += round16(uc * udk);  // [C, dk] queries
    float* Wc = p;   p += round16(uc * udk);  // [C, dk] W = T diag(beta exp(G)) K
    float* Uc = p;   p += round16(uc * udv);  // [C, dv] U = T diag(beta) V, then D = U - W S0 (the deltas)
    float* Yc = p;   p += round16(uc * udv);  // [C, dv] matmul output: W S0
    float* Mt = p;   p += round16(uc * uc);   // [C, C]  k_t.k_s, then -A, then T = (I + A)^{-1} (strictly lower)
    float* Pq = p;   p += round16(uc * uc);   // [C, C]  q_t.k_s, then exp(G_t - G_s) q_t.k_s for s <= t
    float* Gc = p;   p += round16(uc);        // [C]     cumulative log decay within the chunk
    float* Bc = p;   p += round16(uc);        // [C]     beta
    float* Ec = p;                            // [C]     state-update decays exp(G_{L-1} - G_s)

    for (int h = h0; h < h1; ++h) {
      float* ST = state + std::size_t(h) * head_state;  // [dv, dk]: S0 transposed, row j = S0[:, j]
      const std::size_t kq_off = std::size_t(h / group) * udk, v_off = std::size_t(h) * udv;
      for (int t0 = 0; t0 < T; t0 += C) {
        const int L = std::min(C, T - t0);
        // Gather the chunk; cumulative decay G_t (summed in order, as the recurrence multiplies exp(g) in order).
        float G = 0.0f;
        for (int t = 0; t < L; ++t) {
          const std::size_t row = std::size_t(t0 + t);
          std::memcpy(Kc + std::size_t(t) * udk, in.k + row * in.ldk + kq_off, sizeof(float) * udk);
          std::memcpy(Qc + std::size_t(t) * udk, in.q + row * in.ldq + kq_off, sizeof(float) * udk);
          std::memcpy(Uc + std::size_t(t) * udv, in.v + row * in.ldv + v_off, sizeof(float) * udv);
          G += in.g[row * std::size_t(d.v_heads) + h];
          Gc[t] = G;
          Bc[t] = in.beta[row * std::size_t(d.v_heads) + h];
        }
        // K K^T and Q K^T (full L x L; only the lower triangles are used), then the decays and beta:
        //   Mt[t, s] = -A[t, s] = -beta_t exp(G_t - G_s) k_t.k_s (s < t);  Pq[t, s] = exp(G_t - G_s) q_t.k_s (s <= t).
        K::matmul(Kc, udk, Kc, udk, Mt, uc, L, L, dk);
        K::matmul(Kc, udk, Qc, udk, Pq, uc, L, L, dk);
        for (int t = 0; t < L; ++t)
          for (int s = 0; s <= t; ++s) {
            const float decay = std::exp(Gc[t] - Gc[s]);
            Mt[std::size_t(t) * uc + s] *= -Bc[t] * decay;
            Pq[std::size_t(t) * uc + s] *= decay;
          }
        // T = (I + A)^{-1} by forward substitution, in place over Mt's strictly lower part:
        //   T[t, :t] = -A[t, :t] - sum_{r<t} A[t, r] T[r, :r]
        // Row t is updated for r ascending; step r writes columns [0, r) only, so A[t, r] is still unmodified
        // (= -Mt[t, r]) when it is read.
        for (int t = 1; t < L; ++t) {
          float* row = Mt + std::size_t(t) * uc;
          for (int r = 1; r < t; ++r) K::axpy(row[r], Mt + std::size_t(r) * uc, row, r);
        }
        // U = T diag(beta) V and W = T diag(beta exp(G)) K, row t from rows s <= t (T[t, t] = 1). Rows are built
        // from the last to the first so U can overwrite V in place (row t only reads rows s <= t of V).
        for (int t = L - 1; t >= 0; --t) {
          float* ut = Uc + std::size_t(t) * udv;
          float* wt = Wc + std::size_t(t) * udk;
          const float* Trow = Mt + std::size_t(t) * uc;
          const float et = std::exp(Gc[t]);
          for (int i = 0; i < dk; ++i) wt[i] = Bc[t] * et * Kc[std::size_t(t) * udk + i];
          for (int j = 0; j < dv; ++j) ut[j] *= Bc[t];
          for (int s = 0; s < t; ++s) {
            K::axpy(Trow[s] * Bc[s], Uc + std::size_t(s) * udv, ut, dv);
            K::axpy(Trow[s] * Bc[s] * std::exp(Gc[s]), Kc + std::size_t(s) * udk, wt, dk);
          }
        }
        // D = U - W S0:  (W S0)[t, j] = sum_i W[t, i] ST[j, i], a matmul with ST as the [dv, dk] weight.
        K::matmul(ST, udk, Wc, udk, Yc, udv, L, dv, dk);
        for (std::size_t i = 0; i < std::size_t(L) * udv; ++i) Uc[i] -= Yc[i];
        // O = diag(exp(G)) Q S0 + (masked decayed Q K^T) D, before the state moves on; Q S0 straight into out.
        float* o0 = out + std::size_t(t0) * ldo + v_off;
        K::matmul(ST, udk, Qc, udk, o0, ldo, L, dv, dk);
        for (int t = 0; t < L; ++t) {
          float* ot = o0 + std::size_t(t) * ldo;
          const float et = std::exp(Gc[t]);
          for (int j = 0; j < dv; ++j) ot[j] *= et;
          for (int s = 0; s <= t; ++s) K::axpy(Pq[std::size_t(t) * uc + s], Uc + std::size_t(s) * udv, ot, dv);
        }
        // S_L = exp(G_{L-1}) S0 + sum_s exp(G_{L-1} - G_s) k_s d_s^T; row j of ST gets sum_s Ec[s] D[s, j] k_s.
        const float e_last = std::exp(Gc[L - 1]);
        for (int s = 0; s < L; ++s) Ec[s] = std::exp(Gc[L - 1] - Gc[s]);
        for (int j = 0; j < dv; ++j) {
          float* row = ST + std::size_t(j) * udk;
          for (int i = 0; i < dk; ++i) row[i] *= e_last;
          for (int s = 0; s < L; ++s) K::axpy(Ec[s] * Uc[std::size_t(s) * udv + j], Kc + std::size_t(s) * udk, row, dk);
        }
      }
    }
  });
}

// ---- input preparation -------------------------------------------------------------------------------------------

// In place, every `dim` slice of rows [0, rows): x <- x / sqrt(sum(x^2) + eps) * scale. The reduction is the SUM of
// squares (L2 normalisation; BUG-005-1: not the mean). q uses scale = 1/sqrt(dk), k uses scale = 1.
//   x [rows, heads * dim] row stride ld
inline void l2_normalize_heads(runtime::ThreadPool& pool, float* x, int rows, std::size_t ld, int heads, int dim,
                               float eps, float scale) {
  pool.parallel_for(rows * heads, std::max(1, 16384 / std::max(dim, 1)), [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      float* xs = x + std::size_t(i / heads) * ld + std::size_t(i % heads) * std::size_t(dim);
      float ss = 0.0f;
      for (int j = 0; j < dim; ++j) ss += xs[j] * xs[j];
      const float inv = 1.0f / std::sqrt(ss + eps);
      for (int j = 0; j < dim; ++j) xs[j] = xs[j] * inv * scale;
    }
  });
}

// softplus(x) = log(1 + exp(x)), written to neither overflow for large x nor lose small values for negative x.
inline float softplus(float x) { return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))); }

// Per token and value head (Gated DeltaNet, sec. 3 of the paper; the Mamba2-style decay parameterisation):
//   beta = sigmoid(b),   g = -exp(A_log) * softplus(a + dt_bias)   (so g <= 0 and exp(g) in (0, 1])
//   b, a [T, v_heads] rows ldb / lda;  A_log, dt_bias [v_heads] f32 (widened once);  beta, g [T, v_heads]
inline void gated_delta_gates(const float* b, std::size_t ldb, const float* a, std::size_t lda, const float* A_log,
                              const float* dt_bias, int T, int v_heads, float* beta, float* g) {
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < v_heads; ++h) {
      const float bv = b[std::size_t(t) * ldb + h], av = a[std::size_t(t) * lda + h];
      beta[std::size_t(t) * v_heads + h] = 1.0f / (1.0f + std::exp(-bv));
      g[std::size_t(t) * v_heads + h] = -std::exp(A_log[h]) * softplus(av + dt_bias[h]);
    }
}

}  // namespace mi::model
