// The oracle's forward pass (see reference_forward.h). Plain loops, double precision, one function per step.
// Shapes: T = tokens appended in this call, H = hidden_size, I = intermediate_size, V = vocab_size,
// nH / nKV = query / key-value heads, D = head_dim, S = cached positions after this call.
#include "oracle/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

namespace mi::oracle {

namespace {

// Weights of one decoder layer (pointers into the mapped checkpoint): the token mixer of its kind, then the MLP.
// A hybrid model's Gated DeltaNet layers would add a LinearAttentionWeights member and a step function for it.
struct AttentionWeights {  // LayerKind::FullAttention
  const TensorRef* q_proj;  // [nH*D, H]
  const TensorRef* k_proj;  // [nKV*D, H]
  const TensorRef* v_proj;  // [nKV*D, H]
  const TensorRef* q_norm;  // [D]   (Qwen3 only, else nullptr)
  const TensorRef* k_norm;  // [D]   (Qwen3 only, else nullptr)
  const TensorRef* o_proj;  // [H, nH*D]
};
struct MlpWeights {  // SwiGLU
  const TensorRef* gate_proj;  // [I, H]
  const TensorRef* up_proj;    // [I, H]
  const TensorRef* down_proj;  // [H, I]
};
struct LayerWeights {
  LayerKind kind;
  const TensorRef* input_norm;  // [H]
  AttentionWeights attn;
  const TensorRef* post_norm;   // [H]
  MlpWeights mlp;
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

// y = w * x / sqrt(mean(x^2) + eps), over one vector of n.
void rms_norm(const double* x, const TensorRef& w, double eps, int64_t n, double* y) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv_rms = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w.at(i) * (x[i] * inv_rms);
}

// Rotary, rotate-half layout, on one head vector of D at position `pos`: for i < D/2, with a = pos * inv_freq[i],
//   (x[i], x[i + D/2]) -> (x[i] cos a - x[i + D/2] sin a,  x[i + D/2] cos a + x[i] sin a).
// The table (a, cos a, sin a) is float32, as Hugging Face's model definition builds it: the angle of position p is
// rounded by up to p * 6e-8 rad, a deviation from exact rotary that the model sees (and was trained with). With an
// exact double table the 150-token golden traces differ by up to 1.2e-4 in the logits (llama-tiny p2); with this
// one by 2e-5 to 6e-5. Everything else stays double.
void rope(double* x, int64_t D, int64_t pos, const std::vector<double>& inv_freq) {
  const int64_t half = D / 2;
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

// ---- blocks -----------------------------------------------------------------------------------------------------

struct Dims {
  int64_t V, H, I, nH, nKV, D, L;
  double eps;
};

// out[T, H] = attention(h), h = the normed input [T, H]; the new keys/values are appended to `cache` (which holds
// pos0 positions before).
void attention(const AttentionWeights& w, const Dims& d, const std::vector<double>& inv_freq, int threads,
               WeightQuantization quant, int64_t pos0, ReferenceModel::Sequence::LayerCache& cache, const std::vector<double>& h, int64_t T,
               std::vector<double>& out) {
  const int64_t qd = d.nH * d.D, kvd = d.nKV * d.D;
  std::vector<double> q(T * qd), k(T * kvd), v(T * kvd);                   // [T, nH*D], [T, nKV*D] x2
  matmul(h.data(), T, *w.q_proj, q.data(), threads, quant);
  matmul(h.data(), T, *w.k_proj, k.data(), threads, quant);
  matmul(h.data(), T, *w.v_proj, v.data(), threads, quant);

  for (int64_t t = 0; t < T; ++t) {
    for (int64_t hh = 0; hh < d.nH; ++hh) {
      double* qh = &q[t * qd + hh * d.D];
      if (w.q_norm) rms_norm(qh, *w.q_norm, d.eps, d.D, qh);  // Qwen3: RMSNorm of every head vector, before rotary
      rope(qh, d.D, pos0 + t, inv_freq);
    }
    for (int64_t hh = 0; hh < d.nKV; ++hh) {
      double* kh = &k[t * kvd + hh * d.D];
      if (w.k_norm) rms_norm(kh, *w.k_norm, d.eps, d.D, kh);
      rope(kh, d.D, pos0 + t, inv_freq);
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
  matmul(att.data(), T, *w.o_proj, out.data(), threads, quant);                  // out: [T, H]
}

// out[T, H] = down(silu(gate(h)) * up(h)), h = the normed input [T, H].
void swiglu_mlp(const MlpWeights& w, const Dims& d, int threads, WeightQuantization quant, const std::vector<double>& h, int64_t T,
                std::vector<double>& out) {
  std::vector<double> g(T * d.I), u(T * d.I);                               // [T, I] x2
  matmul(h.data(), T, *w.gate_proj, g.data(), threads, quant);
  matmul(h.data(), T, *w.up_proj, u.data(), threads, quant);
  for (int64_t i = 0; i < T * d.I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(g.data(), T, *w.down_proj, out.data(), threads, quant);                 // out: [T, H]
}

}  // namespace

// ---- the model --------------------------------------------------------------------------------------------------

struct ReferenceModel::Impl {
  ReferenceConfig cfg;
  CheckpointWeights weights;
  int threads = 1;
  WeightQuantization quant = WeightQuantization::none;
  Dims d{};
  std::vector<double> inv_freq;  // [D/2]
  const TensorRef* embed = nullptr;       // [V, H]
  const TensorRef* final_norm = nullptr;  // [H]
  const TensorRef* lm_head = nullptr;     // [V, H] (== embed when tied)
  std::vector<LayerWeights> layers;

  Impl(ReferenceConfig c, CheckpointWeights w) : cfg(std::move(c)), weights(std::move(w)) {}
};

ReferenceModel::ReferenceModel(const std::filesystem::path& dir, int threads, WeightQuantization quant) {
  if (threads < 1) error("oracle: threads must be >= 1, got ", threads);
  ReferenceConfig cfg = read_reference_config(dir);
  impl_ = std::make_unique<Impl>(std::move(cfg), CheckpointWeights::open(dir));
  Impl& m = *impl_;
  const ReferenceConfig& c = m.cfg;
  m.threads = threads;
  m.quant = quant;
  m.d = Dims{c.vocab_size, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim,
             c.num_layers, c.rms_norm_eps};
  const Dims& d = m.d;
  m.inv_freq = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);

  const CheckpointWeights& W = m.weights;
  m.embed = &W.get("model.embed_tokens.weight", {d.V, d.H});
  m.final_norm = &W.get("model.norm.weight", {d.H});
  // Tied: the head is the embedding matrix (HF ties them, so a stored lm_head.weight would be ignored).
  m.lm_head = c.tie_word_embeddings ? m.embed : &W.get("lm_head.weight", {d.V, d.H});
  for (int64_t l = 0; l < d.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights w{};
    w.kind = c.layer_kinds[l];
    w.input_norm = &W.get(p + "input_layernorm.weight", {d.H});
    switch (w.kind) {
      case LayerKind::FullAttention:
        w.attn.q_proj = &W.get(p + "self_attn.q_proj.weight", {d.nH * d.D, d.H});
        w.attn.k_proj = &W.get(p + "self_attn.k_proj.weight", {d.nKV * d.D, d.H});
        w.attn.v_proj = &W.get(p + "self_attn.v_proj.weight", {d.nKV * d.D, d.H});
        w.attn.o_proj = &W.get(p + "self_attn.o_proj.weight", {d.H, d.nH * d.D});
        if (c.qk_norm) {
          w.attn.q_norm = &W.get(p + "self_attn.q_norm.weight", {d.D});
          w.attn.k_norm = &W.get(p + "self_attn.k_norm.weight", {d.D});
        }
        break;
    }
    w.post_norm = &W.get(p + "post_attention_layernorm.weight", {d.H});
    w.mlp.gate_proj = &W.get(p + "mlp.gate_proj.weight", {d.I, d.H});
    w.mlp.up_proj = &W.get(p + "mlp.up_proj.weight", {d.I, d.H});
    w.mlp.down_proj = &W.get(p + "mlp.down_proj.weight", {d.H, d.I});
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
  Sequence s;
  s.layers.resize(impl_->layers.size());
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
    for (int64_t t = 0; t < T; ++t) rms_norm(&x[t * d.H], *w.input_norm, d.eps, d.H, &h[t * d.H]);
    switch (w.kind) {
      case LayerKind::FullAttention:
        attention(w.attn, d, m.inv_freq, m.threads, m.quant, pos0, seq.layers[l], h, T, y);
        break;
    }
    for (int64_t i = 0; i < T * d.H; ++i) x[i] += y[i];

    for (int64_t t = 0; t < T; ++t) rms_norm(&x[t * d.H], *w.post_norm, d.eps, d.H, &h[t * d.H]);
    swiglu_mlp(w.mlp, d, m.threads, m.quant, h, T, y);
    for (int64_t i = 0; i < T * d.H; ++i) x[i] += y[i];
  }
  seq.length += static_cast<int>(T);

  // Final norm and LM head, for the requested rows only.                    logits: [R, V]
  const int64_t R = T - logits_from;
  for (int64_t r = 0; r < R; ++r) rms_norm(&x[(logits_from + r) * d.H], *m.final_norm, d.eps, d.H, &h[r * d.H]);
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
