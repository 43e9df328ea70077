// The oracle's forward pass (see reference_forward.h). Plain loops, double precision, one function per step.
// Shapes: T = tokens appended in this call, H = hidden_size, I = intermediate_size, V = vocab_size,
// nH / nKV = query / key-value heads, D = head_dim, R = rotary dims per head, S = cached positions after this call;
// Gated DeltaNet: nk / nv = key / value heads, dk / dv = their dims, C = 2 nk dk + nv dv conv channels, K = conv
// kernel; MoE: E = experts, Ie / Is = expert / shared-expert intermediate size.
#include "oracle/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

namespace mi::oracle {

namespace {

// Weights of one decoder layer (pointers into the mapped checkpoint): the token mixer of its kind, then the MLP.
struct AttentionWeights {  // LayerKind::FullAttention
  const TensorRef* q_proj;  // [nH*D, H], or [nH*2D, H] when output-gated (per head: D query rows, D gate rows)
  const TensorRef* k_proj;  // [nKV*D, H]
  const TensorRef* v_proj;  // [nKV*D, H]
  const TensorRef* q_norm;  // [D]   (Qwen3 and hybrids, else nullptr)
  const TensorRef* k_norm;  // [D]   (Qwen3 and hybrids, else nullptr)
  const TensorRef* o_proj;  // [H, nH*D]
};
struct LinearAttentionWeights {  // LayerKind::LinearAttention (Gated DeltaNet)
  // Qwen3.5: separate projections.
  const TensorRef* in_proj_qkv;   // [C, H]      rows q (nk*dk) | k (nk*dk) | v (nv*dv)
  const TensorRef* in_proj_z;     // [nv*dv, H]
  const TensorRef* in_proj_b;     // [nv, H]
  const TensorRef* in_proj_a;     // [nv, H]
  // Qwen3-Next: grouped per key head h: q (dk) | k (dk) | v (r*dv) | z (r*dv), and b (r) | a (r), r = nv/nk.
  const TensorRef* in_proj_qkvz;  // [2*nk*dk + 2*nv*dv, H]
  const TensorRef* in_proj_ba;    // [2*nv, H]
  const TensorRef* conv1d;        // [C, 1, K]
  const TensorRef* A_log;         // [nv]
  const TensorRef* dt_bias;       // [nv]
  const TensorRef* norm;          // [dv]   gated RMSNorm, multiplies by w
  const TensorRef* out_proj;      // [H, nv*dv]
};
struct MlpWeights {  // SwiGLU
  const TensorRef* gate_proj;  // [I, H]
  const TensorRef* up_proj;    // [I, H]
  const TensorRef* down_proj;  // [H, I]
};
struct MoeWeights {  // MlpKind::SparseMoe
  const TensorRef* router;             // [E, H]   mlp.gate.weight
  std::vector<MlpWeights> experts;     // E x SwiGLU with I = Ie
  MlpWeights shared;                   // SwiGLU with I = Is
  const TensorRef* shared_gate;        // [1, H]
};
struct LayerWeights {
  LayerKind kind;
  MlpKind mlp_kind;
  const TensorRef* input_norm;  // [H]
  AttentionWeights attn;
  LinearAttentionWeights linear;
  const TensorRef* post_norm;   // [H]
  MlpWeights mlp;
  MoeWeights moe;
};

// ---- steps ------------------------------------------------------------------------------------------------------

// dot(a, b) over n doubles; four partial sums so the compiler can keep several multiply-adds in flight.
double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

// The int8 weight contract (ckb/contracts/int8_weights.toml), applied to one row of stored weights w[0, n) in place:
// the row's scale s = max|w| / 127 and every element's code q = rne(w / s) clamped to [-127, 127] are computed in
// float32 exactly as the contract states them (one float division each, round half to even), and the row becomes
// q * s (exact in double). An all-zero row stays zero. Written here from the contract text, not shared with the
// engines' quantiser.
void quantize_row_int8(double* w, int64_t n, const std::string& tensor, int64_t row) {
  float amax = 0.0f;
  for (int64_t k = 0; k < n; ++k) {
    const float v = static_cast<float>(w[k]);  // stored bf16/f16/f32: exact in float
    if (!std::isfinite(v)) error("oracle: tensor '", tensor, "' row ", row, ": non-finite weight, cannot quantise to int8");
    amax = std::max(amax, std::fabs(v));
  }
  const float s = amax / 127.0f;
  for (int64_t k = 0; k < n; ++k) {
    if (s == 0.0f) {
      w[k] = 0.0;
      continue;
    }
    float q = std::nearbyint(static_cast<float>(w[k]) / s);  // default rounding mode: to nearest, ties to even
    q = std::min(127.0f, std::max(-127.0f, q));
    w[k] = static_cast<double>(q) * static_cast<double>(s);
  }
}

// Y[T, out] = X[T, in] @ W[out, in]^T. Each weight row is converted to double once per call (and, for an int8
// engine, quantised as its contract says) and used for all T positions; output rows are split across `threads`.
void matmul(const double* X, int64_t T, const TensorRef& W, double* Y, int threads, WeightQuantization quant) {
  const int64_t out = W.shape[0], in = W.shape[1];
  auto rows = [&](int64_t r0, int64_t r1) {
    constexpr int64_t kBlock = 8;  // rows converted together, so each X row is fetched once per block
    std::vector<double> w(kBlock * in);
    for (int64_t r = r0; r < r1; r += kBlock) {
      const int64_t nb = std::min(kBlock, r1 - r);
      for (int64_t b = 0; b < nb; ++b) {
        W.row_to_double(r + b, in, w.data() + b * in);
        if (quant == WeightQuantization::int8_per_row) quantize_row_int8(w.data() + b * in, in, W.name, r + b);
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < nb; ++b) Y[t * out + r + b] = dot(w.data() + b * in, X + t * in, in);
    }
  };
  const int64_t work = out * in * std::max<int64_t>(T, 1);
  const int n = static_cast<int>(std::min<int64_t>(threads, out));
  if (n <= 1 || work < (int64_t(1) << 18)) {
    rows(0, out);
    return;
  }
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(rows, out * i / n, out * (i + 1) / n);
  rows(0, out / n);
  for (std::thread& th : pool) th.join();
}

// y = w * x / sqrt(mean(x^2) + eps), over one vector of n; with one_plus (the hybrids' zero-centred weights)
// y = (1 + w) * x / sqrt(mean(x^2) + eps).
void rms_norm(const double* x, const TensorRef& w, double eps, int64_t n, double* y, bool one_plus = false) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv_rms = 1.0 / std::sqrt(ss / n + eps);
  if (one_plus) {
    for (int64_t i = 0; i < n; ++i) y[i] = (1.0 + w.at(i)) * (x[i] * inv_rms);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = w.at(i) * (x[i] * inv_rms);
}

// Rotary, rotate-half layout, on the first R dims of one head vector at position `pos` (R = D, or the hybrids'
// partial rotary dim; dims R..D-1 pass through): for i < R/2, with a = pos * inv_freq[i],
//   (x[i], x[i + R/2]) -> (x[i] cos a - x[i + R/2] sin a,  x[i + R/2] cos a + x[i] sin a).
// Qwen3.5's interleaved M-RoPE reduces to this for token-only input (all three position components = pos).
// The table (a, cos a, sin a) is float32, as Hugging Face's model definition builds it: the angle of position p is
// rounded by up to p * 6e-8 rad, a deviation from exact rotary that the model sees (and was trained with). With an
// exact double table the 150-token golden traces differ by up to 1.2e-4 in the logits (llama-tiny p2); with this
// one by 2e-5 to 6e-5. Everything else stays double.
void rope(double* x, int64_t R, int64_t pos, const std::vector<double>& inv_freq) {
  const int64_t half = R / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = static_cast<float>(pos) * static_cast<float>(inv_freq[i]);
    const double c = static_cast<float>(std::cos(static_cast<double>(a)));
    const double s = static_cast<float>(std::sin(static_cast<double>(a)));
    const double x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x1 * c + x0 * s;
  }
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20): log(1 + e^x), and x itself above 20.
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// ---- blocks -----------------------------------------------------------------------------------------------------

struct Dims {
  int64_t V, H, I, nH, nKV, D, L;
  double eps;
  int64_t R = 0;                             // rotary dims per head
  bool one_plus = false;                     // RMSNorm by (1 + w) (hybrids)
  bool gated = false;                        // attention output gate (hybrids)
  int64_t nk = 0, dk = 0, nv = 0, dv = 0, K = 0;  // Gated DeltaNet
  bool grouped = false;                      // qwen3_next's grouped in_proj_qkvz / in_proj_ba
  int64_t E = 0, top_k = 0;                  // MoE
  bool norm_topk = true;
};

// out[T, H] = attention(h), h = the normed input [T, H]; the new keys/values are appended to `cache` (which holds
// pos0 positions before).
void attention(const AttentionWeights& w, const Dims& d, const std::vector<double>& inv_freq, int threads,
               WeightQuantization quant, int64_t pos0, ReferenceModel::Sequence::LayerCache& cache, const std::vector<double>& h, int64_t T,
               std::vector<double>& out) {
  const int64_t qd = d.nH * d.D, kvd = d.nKV * d.D;
  std::vector<double> q(T * qd), k(T * kvd), v(T * kvd);                   // [T, nH*D], [T, nKV*D] x2
  std::vector<double> gate;                                                // [T, nH*D] when output-gated
  if (d.gated) {
    // q_proj yields [T, nH, 2D]: per head the query (first D) then the gate (next D).
    std::vector<double> qg(T * 2 * qd);                                    // [T, nH*2D]
    matmul(h.data(), T, *w.q_proj, qg.data(), threads, quant);
    gate.resize(T * qd);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hh = 0; hh < d.nH; ++hh)
        for (int64_t i = 0; i < d.D; ++i) {
          q[t * qd + hh * d.D + i] = qg[t * 2 * qd + hh * 2 * d.D + i];
          gate[t * qd + hh * d.D + i] = qg[t * 2 * qd + hh * 2 * d.D + d.D + i];
        }
  } else {
    matmul(h.data(), T, *w.q_proj, q.data(), threads, quant);
  }
  matmul(h.data(), T, *w.k_proj, k.data(), threads, quant);
  matmul(h.data(), T, *w.v_proj, v.data(), threads, quant);

  for (int64_t t = 0; t < T; ++t) {
    for (int64_t hh = 0; hh < d.nH; ++hh) {
      double* qh = &q[t * qd + hh * d.D];
      // Qwen3 and hybrids: RMSNorm of every head vector, before rotary
      if (w.q_norm) rms_norm(qh, *w.q_norm, d.eps, d.D, qh, d.one_plus);
      rope(qh, d.R, pos0 + t, inv_freq);
    }
    for (int64_t hh = 0; hh < d.nKV; ++hh) {
      double* kh = &k[t * kvd + hh * d.D];
      if (w.k_norm) rms_norm(kh, *w.k_norm, d.eps, d.D, kh, d.one_plus);
      rope(kh, d.R, pos0 + t, inv_freq);
    }
  }
  cache.k.insert(cache.k.end(), k.begin(), k.end());                       // cache: [S, nKV*D]
  cache.v.insert(cache.v.end(), v.begin(), v.end());

  // Causal GQA attention: query head hh reads KV head hh / (nH/nKV); position pos0+t sees positions 0..pos0+t.
  std::vector<double> att(T * qd, 0.0);                                    // [T, nH*D]
  std::vector<double> score(pos0 + T);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.D));
  const int64_t group = d.nH / d.nKV;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n_seen = pos0 + t + 1;
    for (int64_t hh = 0; hh < d.nH; ++hh) {
      const double* qh = &q[t * qd + hh * d.D];
      const int64_t kv = hh / group;
      double max_score = -INFINITY;
      for (int64_t s = 0; s < n_seen; ++s) {
        score[s] = dot(qh, &cache.k[s * kvd + kv * d.D], d.D) * scale;
        max_score = std::max(max_score, score[s]);
      }
      double sum = 0;
      for (int64_t s = 0; s < n_seen; ++s) sum += (score[s] = std::exp(score[s] - max_score));
      double* o = &att[t * qd + hh * d.D];
      for (int64_t s = 0; s < n_seen; ++s) {
        const double p = score[s] / sum;
        const double* vs = &cache.v[s * kvd + kv * d.D];
        for (int64_t i = 0; i < d.D; ++i) o[i] += p * vs[i];
      }
    }
  }
  if (d.gated)  // hybrids: per-head output gate, before o_proj
    for (int64_t i = 0; i < T * qd; ++i) att[i] *= sigmoid(gate[i]);
  matmul(att.data(), T, *w.o_proj, out.data(), threads, quant);                  // out: [T, H]
}

// out[T, H] = GatedDeltaNet(h), h = the normed input [T, H], token by token over the conv window and recurrent state
// in `cache` (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025, recurrent form of the gated delta rule):
//   S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - (exp(g_t) S_{t-1})^T k_t))^T,   o_t = S_t^T q_t     (S: [dk, dv])
void gated_deltanet(const LinearAttentionWeights& w, const Dims& d, int threads, WeightQuantization quant,
                    ReferenceModel::Sequence::LayerCache& cache, const std::vector<double>& h, int64_t T,
                    std::vector<double>& out) {
  const int64_t qk = d.nk * d.dk, vd = d.nv * d.dv, C = 2 * qk + vd, r = d.nv / d.nk;
  std::vector<double> qkv(T * C), z(T * vd), b(T * d.nv), a(T * d.nv);   // [T, C], [T, nv*dv], [T, nv] x2
  if (d.grouped) {
    // Qwen3-Next: reorder the per-key-head groups into the [q | k | v], z, b, a layout.
    const int64_t G = 2 * d.dk + 2 * r * d.dv;                              // qkvz rows per key head
    std::vector<double> qkvz(T * d.nk * G), ba(T * 2 * d.nv);              // [T, nk*G], [T, 2nv]
    matmul(h.data(), T, *w.in_proj_qkvz, qkvz.data(), threads, quant);
    matmul(h.data(), T, *w.in_proj_ba, ba.data(), threads, quant);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t kh = 0; kh < d.nk; ++kh) {
        const double* g = &qkvz[t * d.nk * G + kh * G];
        double* row = &qkv[t * C];
        for (int64_t i = 0; i < d.dk; ++i) {
          row[kh * d.dk + i] = g[i];
          row[qk + kh * d.dk + i] = g[d.dk + i];
        }
        for (int64_t i = 0; i < r * d.dv; ++i) {
          row[2 * qk + kh * r * d.dv + i] = g[2 * d.dk + i];
          z[t * vd + kh * r * d.dv + i] = g[2 * d.dk + r * d.dv + i];
        }
        for (int64_t i = 0; i < r; ++i) {
          b[t * d.nv + kh * r + i] = ba[t * 2 * d.nv + kh * 2 * r + i];
          a[t * d.nv + kh * r + i] = ba[t * 2 * d.nv + kh * 2 * r + r + i];
        }
      }
  } else {
    matmul(h.data(), T, *w.in_proj_qkv, qkv.data(), threads, quant);
    matmul(h.data(), T, *w.in_proj_z, z.data(), threads, quant);
    matmul(h.data(), T, *w.in_proj_b, b.data(), threads, quant);
    matmul(h.data(), T, *w.in_proj_a, a.data(), threads, quant);
  }

  std::vector<double> conv_w(C * d.K);                                      // [C, K]
  w.conv1d->row_to_double(0, C * d.K, conv_w.data());
  std::vector<double> att(T * vd);                                          // [T, nv*dv]
  std::vector<double> y(C), kv(d.dv), o(d.dv);
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(d.dk));
  constexpr double kL2Eps = 1e-6;  // x / sqrt(sum x^2 + 1e-6), the L2 norm of q and k
  for (int64_t t = 0; t < T; ++t) {
    // Causal depthwise conv1d (no bias) over [the K-1 previous pre-conv vectors, this one], then SiLU:
    //   y[c] = silu(sum_j conv_w[c, j] * window[j][c]), window[K-1] = this token.
    const double* x = &qkv[t * C];
    for (int64_t c = 0; c < C; ++c) {
      double s = conv_w[c * d.K + d.K - 1] * x[c];
      for (int64_t j = 0; j + 1 < d.K; ++j) s += conv_w[c * d.K + j] * cache.conv[j * C + c];
      y[c] = silu(s);
    }
    if (d.K > 1) {  // slide the window: drop the oldest, append this token's pre-conv vector
      std::copy(cache.conv.begin() + C, cache.conv.end(), cache.conv.begin());
      std::copy(x, x + C, cache.conv.end() - C);
    }
    // q, k: L2-normalised per key head; q also scaled by 1/sqrt(dk).
    for (int64_t hd = 0; hd < 2 * d.nk; ++hd) {
      double* v = &y[hd * d.dk];
      double ss = 0;
      for (int64_t i = 0; i < d.dk; ++i) ss += v[i] * v[i];
      const double inv = 1.0 / std::sqrt(ss + kL2Eps) * (hd < d.nk ? q_scale : 1.0);
      for (int64_t i = 0; i < d.dk; ++i) v[i] *= inv;
    }
    for (int64_t hv = 0; hv < d.nv; ++hv) {
      const int64_t kh = hv / r;  // key head kh serves value heads kh*r .. kh*r + r - 1
      const double* qh = &y[kh * d.dk];
      const double* kh_vec = &y[qk + kh * d.dk];
      const double* vh = &y[2 * qk + hv * d.dv];
      const double beta = sigmoid(b[t * d.nv + hv]);
      const double g = -std::exp(w.A_log->at(hv)) * softplus(a[t * d.nv + hv] + w.dt_bias->at(hv));
      const double decay = std::exp(g);
      double* S = &cache.state[hv * d.dk * d.dv];                           // [dk, dv]
      for (int64_t i = 0; i < d.dk * d.dv; ++i) S[i] *= decay;
      std::fill(kv.begin(), kv.end(), 0.0);
      for (int64_t i = 0; i < d.dk; ++i)
        for (int64_t j = 0; j < d.dv; ++j) kv[j] += S[i * d.dv + j] * kh_vec[i];   // S^T k
      for (int64_t j = 0; j < d.dv; ++j) kv[j] = beta * (vh[j] - kv[j]);           // delta
      for (int64_t i = 0; i < d.dk; ++i)
        for (int64_t j = 0; j < d.dv; ++j) S[i * d.dv + j] += kh_vec[i] * kv[j];   // S += k delta^T
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t i = 0; i < d.dk; ++i)
        for (int64_t j = 0; j < d.dv; ++j) o[j] += S[i * d.dv + j] * qh[i];        // S^T q
      // Gated RMSNorm: w * RMSNorm(o) (weight as stored) times silu(z).
      double* dst = &att[t * vd + hv * d.dv];
      rms_norm(o.data(), *w.norm, d.eps, d.dv, dst);
      for (int64_t j = 0; j < d.dv; ++j) dst[j] *= silu(z[t * vd + hv * d.dv + j]);
    }
  }
  matmul(att.data(), T, *w.out_proj, out.data(), threads, quant);                // out: [T, H]
}

// out[T, H] = down(silu(gate(h)) * up(h)), h = the normed input [T, H]; I = gate_proj's rows.
void swiglu_mlp(const MlpWeights& w, int threads, WeightQuantization quant, const std::vector<double>& h, int64_t T,
                std::vector<double>& out) {
  const int64_t I = w.gate_proj->shape[0];
  std::vector<double> g(T * I), u(T * I);                                   // [T, I] x2
  matmul(h.data(), T, *w.gate_proj, g.data(), threads, quant);
  matmul(h.data(), T, *w.up_proj, u.data(), threads, quant);
  for (int64_t i = 0; i < T * I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(g.data(), T, *w.down_proj, out.data(), threads, quant);                 // out: [T, H]
}

// out[T, H] = sparse MoE of h [T, H] (qwen3_next): p = softmax(router h) over the E experts; the top_k largest
// (renormalised to sum 1 when norm_topk_prob); out = sum_chosen p_e expert_e(h) + sigmoid(shared_gate h) shared(h).
void sparse_moe(const MoeWeights& w, const Dims& d, int threads, WeightQuantization quant,
                const std::vector<double>& h, int64_t T, std::vector<double>& out) {
  std::vector<double> logits(T * d.E);                                      // [T, E]
  matmul(h.data(), T, *w.router, logits.data(), threads, quant);
  std::vector<std::vector<int64_t>> tokens(d.E);                            // per expert: the tokens routed to it
  std::vector<std::vector<double>> probs(d.E);                              //             and their weights
  std::vector<int64_t> order(d.E);
  for (int64_t t = 0; t < T; ++t) {
    double* p = &logits[t * d.E];
    const double mx = *std::max_element(p, p + d.E);
    double sum = 0;
    for (int64_t e = 0; e < d.E; ++e) sum += (p[e] = std::exp(p[e] - mx));
    for (int64_t e = 0; e < d.E; ++e) p[e] /= sum;
    for (int64_t e = 0; e < d.E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return p[x] > p[y]; });
    double chosen = 0;
    for (int64_t i = 0; i < d.top_k; ++i) chosen += p[order[i]];
    for (int64_t i = 0; i < d.top_k; ++i) {
      tokens[order[i]].push_back(t);
      probs[order[i]].push_back(d.norm_topk ? p[order[i]] / chosen : p[order[i]]);
    }
  }
  std::fill(out.begin(), out.end(), 0.0);
  std::vector<double> xe, ye;
  for (int64_t e = 0; e < d.E; ++e) {
    const int64_t n = static_cast<int64_t>(tokens[e].size());
    if (n == 0) continue;
    xe.resize(n * d.H);                                                     // [n, H]: this expert's tokens
    ye.resize(n * d.H);
    for (int64_t i = 0; i < n; ++i) std::copy_n(&h[tokens[e][i] * d.H], d.H, &xe[i * d.H]);
    swiglu_mlp(w.experts[e], threads, quant, xe, n, ye);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d.H; ++c) out[tokens[e][i] * d.H + c] += probs[e][i] * ye[i * d.H + c];
  }
  std::vector<double> shared(T * d.H), sg(T);                               // [T, H], [T, 1]
  swiglu_mlp(w.shared, threads, quant, h, T, shared);
  matmul(h.data(), T, *w.shared_gate, sg.data(), threads, quant);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < d.H; ++c) out[t * d.H + c] += sigmoid(sg[t]) * shared[t * d.H + c];
}

}  // namespace

// ---- the model --------------------------------------------------------------------------------------------------

struct ReferenceModel::Impl {
  ReferenceConfig cfg;
  CheckpointWeights weights;
  int threads = 1;
  WeightQuantization quant = WeightQuantization::none;
  Dims d{};
  std::vector<double> inv_freq;  // [R/2]
  const TensorRef* embed = nullptr;       // [V, H]
  const TensorRef* final_norm = nullptr;  // [H]
  const TensorRef* lm_head = nullptr;     // [V, H] (== embed when tied)
  std::vector<LayerWeights> layers;

  Impl(ReferenceConfig c, CheckpointWeights w) : cfg(std::move(c)), weights(std::move(w)) {}
};

ReferenceModel::ReferenceModel(const std::filesystem::path& dir, int threads, WeightQuantization quant) {
  if (threads < 1) error("oracle: threads must be >= 1, got ", threads);
  ReferenceConfig cfg = read_reference_config(dir);
  if (quant != WeightQuantization::none && cfg.norm_one_plus_weight)
    error((dir / "config.json").string(), ": field 'architectures': int8 weight quantisation is defined "
          "(ckb/contracts/int8_weights.toml) for the dense families only, not for ", cfg.architecture);
  impl_ = std::make_unique<Impl>(std::move(cfg), CheckpointWeights::open(dir));
  Impl& m = *impl_;
  const ReferenceConfig& c = m.cfg;
  m.threads = threads;
  m.quant = quant;
  m.d = Dims{c.vocab_size, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim,
             c.num_layers, c.rms_norm_eps};
  m.d.R = c.rotary_dim;
  m.d.one_plus = c.norm_one_plus_weight;
  m.d.gated = c.attn_output_gate;
  m.d.nk = c.linear.num_key_heads;
  m.d.dk = c.linear.key_head_dim;
  m.d.nv = c.linear.num_value_heads;
  m.d.dv = c.linear.value_head_dim;
  m.d.K = c.linear.conv_kernel;
  m.d.grouped = c.grouped_linear_proj;
  m.d.E = c.moe.num_experts;
  m.d.top_k = c.moe.experts_per_token;
  m.d.norm_topk = c.moe.norm_topk_prob;
  const Dims& d = m.d;
  m.inv_freq = rope_inv_freq(c.rotary_dim, c.rope_theta, c.rope_scaling);

  const CheckpointWeights& W = m.weights;
  const std::string& P = c.weight_prefix;  // "model." or "model.language_model."
  m.embed = &W.get(P + "embed_tokens.weight", {d.V, d.H});
  m.final_norm = &W.get(P + "norm.weight", {d.H});
  // Tied: the head is the embedding matrix (HF ties them, so a stored lm_head.weight would be ignored).
  m.lm_head = c.tie_word_embeddings ? m.embed : &W.get("lm_head.weight", {d.V, d.H});
  auto swiglu = [&](const std::string& p, int64_t I) {
    return MlpWeights{&W.get(p + "gate_proj.weight", {I, d.H}), &W.get(p + "up_proj.weight", {I, d.H}),
                      &W.get(p + "down_proj.weight", {d.H, I})};
  };
  for (int64_t l = 0; l < d.L; ++l) {
    const std::string p = P + "layers." + std::to_string(l) + ".";
    LayerWeights w{};
    w.kind = c.layer_kinds[l];
    w.mlp_kind = c.mlp_kinds[l];
    w.input_norm = &W.get(p + "input_layernorm.weight", {d.H});
    switch (w.kind) {
      case LayerKind::FullAttention:
        w.attn.q_proj = &W.get(p + "self_attn.q_proj.weight", {d.nH * d.D * (d.gated ? 2 : 1), d.H});
        w.attn.k_proj = &W.get(p + "self_attn.k_proj.weight", {d.nKV * d.D, d.H});
        w.attn.v_proj = &W.get(p + "self_attn.v_proj.weight", {d.nKV * d.D, d.H});
        w.attn.o_proj = &W.get(p + "self_attn.o_proj.weight", {d.H, d.nH * d.D});
        if (c.qk_norm) {
          w.attn.q_norm = &W.get(p + "self_attn.q_norm.weight", {d.D});
          w.attn.k_norm = &W.get(p + "self_attn.k_norm.weight", {d.D});
        }
        break;
      case LayerKind::LinearAttention: {
        const std::string la = p + "linear_attn.";
        const int64_t qk = d.nk * d.dk, vd = d.nv * d.dv, C = 2 * qk + vd;
        if (d.grouped) {
          w.linear.in_proj_qkvz = &W.get(la + "in_proj_qkvz.weight", {2 * qk + 2 * vd, d.H});
          w.linear.in_proj_ba = &W.get(la + "in_proj_ba.weight", {2 * d.nv, d.H});
        } else {
          w.linear.in_proj_qkv = &W.get(la + "in_proj_qkv.weight", {C, d.H});
          w.linear.in_proj_z = &W.get(la + "in_proj_z.weight", {vd, d.H});
          w.linear.in_proj_b = &W.get(la + "in_proj_b.weight", {d.nv, d.H});
          w.linear.in_proj_a = &W.get(la + "in_proj_a.weight", {d.nv, d.H});
        }
        w.linear.conv1d = &W.get(la + "conv1d.weight", {C, 1, d.K});
        w.linear.A_log = &W.get(la + "A_log", {d.nv});
        w.linear.dt_bias = &W.get(la + "dt_bias", {d.nv});
        w.linear.norm = &W.get(la + "norm.weight", {d.dv});
        w.linear.out_proj = &W.get(la + "out_proj.weight", {d.H, vd});
        break;
      }
    }
    w.post_norm = &W.get(p + "post_attention_layernorm.weight", {d.H});
    switch (w.mlp_kind) {
      case MlpKind::Dense:
        w.mlp = swiglu(p + "mlp.", d.I);
        break;
      case MlpKind::SparseMoe:
        w.moe.router = &W.get(p + "mlp.gate.weight", {d.E, d.H});
        for (int64_t e = 0; e < d.E; ++e)
          w.moe.experts.push_back(swiglu(p + "mlp.experts." + std::to_string(e) + ".", c.moe.expert_intermediate_size));
        w.moe.shared = swiglu(p + "mlp.shared_expert.", c.moe.shared_expert_intermediate_size);
        w.moe.shared_gate = &W.get(p + "mlp.shared_expert_gate.weight", {1, d.H});
        break;
    }
    m.layers.push_back(w);
  }
}

ReferenceModel::ReferenceModel(ReferenceModel&&) noexcept = default;
ReferenceModel& ReferenceModel::operator=(ReferenceModel&&) noexcept = default;
ReferenceModel::~ReferenceModel() = default;

int ReferenceModel::vocab_size() const { return impl_->cfg.vocab_size; }
std::string ReferenceModel::architecture() const { return impl_->cfg.architecture; }
const ReferenceConfig& ReferenceModel::config() const { return impl_->cfg; }
int ReferenceModel::threads() const { return impl_->threads; }

ReferenceModel::Sequence ReferenceModel::new_sequence() const {
  const Impl& m = *impl_;
  const Dims& d = m.d;
  Sequence s;
  s.layers.resize(m.layers.size());
  for (size_t l = 0; l < m.layers.size(); ++l)
    if (m.layers[l].kind == LayerKind::LinearAttention) {
      s.layers[l].conv.assign((d.K - 1) * (2 * d.nk * d.dk + d.nv * d.dv), 0.0);  // [K-1, C]
      s.layers[l].state.assign(d.nv * d.dk * d.dv, 0.0);                         // [nv, dk, dv]
    }
  return s;
}

std::vector<double> ReferenceModel::append(Sequence& seq, const std::vector<int>& ids, int logits_from) const {
  const Impl& m = *impl_;
  const Dims& d = m.d;
  const int64_t T = static_cast<int64_t>(ids.size());
  if (T == 0) error("oracle: append needs at least one token");
  if (logits_from < 0 || logits_from > T) error("oracle: logits_from ", logits_from, " outside [0, ", T, "]");
  if (seq.layers.size() != m.layers.size()) error("oracle: the sequence was not made by this model");
  for (const int id : ids)
    if (id < 0 || id >= d.V) error("oracle: token id ", id, " is outside the vocabulary [0, ", d.V, ")");
  const int64_t pos0 = seq.length;

  // Embedding: x[t] = embed_tokens[ids[t]]                                  x: [T, H]
  std::vector<double> x(T * d.H);
  for (int64_t t = 0; t < T; ++t) m.embed->row_to_double(ids[t], d.H, &x[t * d.H]);

  // Decoder layers (pre-norm, residual):  x += mixer(RMSNorm(x));  x += mlp(RMSNorm(x)).
  std::vector<double> h(T * d.H), y(T * d.H);                              // [T, H] each
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerWeights& w = m.layers[l];
    for (int64_t t = 0; t < T; ++t) rms_norm(&x[t * d.H], *w.input_norm, d.eps, d.H, &h[t * d.H], d.one_plus);
    switch (w.kind) {
      case LayerKind::FullAttention:
        attention(w.attn, d, m.inv_freq, m.threads, m.quant, pos0, seq.layers[l], h, T, y);
        break;
      case LayerKind::LinearAttention:
        gated_deltanet(w.linear, d, m.threads, m.quant, seq.layers[l], h, T, y);
        break;
    }
    for (int64_t i = 0; i < T * d.H; ++i) x[i] += y[i];

    for (int64_t t = 0; t < T; ++t) rms_norm(&x[t * d.H], *w.post_norm, d.eps, d.H, &h[t * d.H], d.one_plus);
    switch (w.mlp_kind) {
      case MlpKind::Dense:
        swiglu_mlp(w.mlp, m.threads, m.quant, h, T, y);
        break;
      case MlpKind::SparseMoe:
        sparse_moe(w.moe, d, m.threads, m.quant, h, T, y);
        break;
    }
    for (int64_t i = 0; i < T * d.H; ++i) x[i] += y[i];
  }
  seq.length += static_cast<int>(T);

  // Final norm and LM head, for the requested rows only.                    logits: [R, V]
  const int64_t R = T - logits_from;
  for (int64_t r = 0; r < R; ++r) rms_norm(&x[(logits_from + r) * d.H], *m.final_norm, d.eps, d.H, &h[r * d.H], d.one_plus);
  std::vector<double> logits(R * d.V);
  if (R > 0) matmul(h.data(), R, *m.lm_head, logits.data(), m.threads, m.quant);
  return logits;
}

// ---- drivers ----------------------------------------------------------------------------------------------------

namespace {

GreedyStep pick(const double* row, int V) {
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (row[i] > row[best]) best = i;  // strict: the lowest id wins a tie, as torch.argmax
  int second = best == 0 ? 1 : 0;
  if (V == 1) return {best, INFINITY, best};
  for (int i = 0; i < V; ++i)
    if (i != best && row[i] > row[second]) second = i;
  return {best, row[best] - row[second], second};
}

}  // namespace

std::vector<GreedyStep> greedy(const ReferenceModel& model, const std::vector<int>& prompt, int n_new) {
  if (prompt.empty()) error("oracle: greedy needs a non-empty prompt");
  if (n_new < 0) error("oracle: greedy needs n_new >= 0, got ", n_new);
  std::vector<GreedyStep> steps;
  if (n_new == 0) return steps;
  const int V = model.vocab_size();
  ReferenceModel::Sequence seq = model.new_sequence();
  std::vector<double> logits = model.append(seq, prompt, static_cast<int>(prompt.size()) - 1);  // last row only
  for (int step = 0; step < n_new; ++step) {
    steps.push_back(pick(logits.data(), V));
    if (step + 1 < n_new) logits = model.append(seq, {steps.back().id});
  }
  return steps;
}

std::vector<double> teacher_forced_logits(const ReferenceModel& model, const std::vector<int>& prompt,
                                          const std::vector<int>& continuation) {
  if (prompt.empty()) error("oracle: teacher_forced_logits needs a non-empty prompt");
  if (continuation.empty()) return {};
  // Positions prompt.size()-1 .. prompt.size()+continuation.size()-2: the last continuation token is not fed, since
  // its row would predict the token after the continuation.
  std::vector<int> ids = prompt;
  ids.insert(ids.end(), continuation.begin(), continuation.end() - 1);
  ReferenceModel::Sequence seq = model.new_sequence();
  return model.append(seq, ids, static_cast<int>(prompt.size()) - 1);
}

}  // namespace mi::oracle
