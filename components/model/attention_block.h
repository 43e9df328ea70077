// The whole attention sub-layer of a dense decoder layer, from the normed hidden state to the o_proj output:
//   q/k/v = h Wq^T / Wk^T / Wv^T -> [Qwen3: per-head RMSNorm of q and k with q_norm / k_norm] -> rotary on q, k
//   -> store k, v in the KV cache -> causal GQA attention -> o_proj.
// The caller adds the result to the residual stream. Whether the family has q/k norm is a template parameter
// (kQkNorm), fixed when an engine is generated: no runtime branch on the model family.
// The T new positions [first_position, first_position + T) must already be appended to the sequence
// (KvCache::append once per forward step, before the first layer).
#pragma once
#include <cstddef>

#include "model/attention.h"
#include "model/linear.h"
#include "model/rms_norm.h"
#include "model/rotary.h"

namespace mi::model {

template <class W>
struct AttentionWeights {
  const W* q_proj;  // [heads * head_dim, hidden]
  const W* k_proj;  // [kv_heads * head_dim, hidden]
  const W* v_proj;  // [kv_heads * head_dim, hidden]
  const W* o_proj;  // [hidden, heads * head_dim]
  const float* q_norm = nullptr;  // [head_dim], widened; used only when kQkNorm
  const float* k_norm = nullptr;  // [head_dim]
};

template <Numerics N>
struct AttentionScratch {
  float* q_raw;    // [T, heads * head_dim]     (q before q_norm; used only when kQkNorm)
  float* q;        // [T, heads * head_dim]
  float* k_raw;    // [T, kv_heads * head_dim]  (used only when kQkNorm)
  float* k;        // [T, kv_heads * head_dim]
  float* v;        // [T, kv_heads * head_dim]
  float* attn;     // [T, heads * head_dim]
  float* scores;   // attention_scratch_floats(pool.size(), max_context)
  MatmulInput<N>* rounded;  // [T, max(hidden, heads * head_dim)] (fast only; may be null in precise)
};

//   h   [T, hidden] f32 (input_layernorm output)
//   out [T, hidden] f32 (o_proj output, not yet added to the residual)
template <class K, Numerics N, bool kQkNorm, class W>
void attention_block(runtime::ThreadPool& pool, runtime::KvCache& cache, int seq, int layer,
                     const AttentionDims& dims, const RotaryTable& rotary, const AttentionWeights<W>& w, int hidden,
                     float eps, const float* h, int T, int first_position, float* out,
                     const AttentionScratch<N>& s) {
  const int nH = dims.heads, nKV = dims.kv_heads, D = dims.head_dim;
  const MatmulInput<N>* hin = matmul_input<K, N>(pool, h, std::size_t(T) * hidden, s.rounded);
  float* q = kQkNorm ? s.q_raw : s.q;
  float* k = kQkNorm ? s.k_raw : s.k;
  linear<K>(pool, w.q_proj, nH * D, hidden, hin, T, q);
  linear<K>(pool, w.k_proj, nKV * D, hidden, hin, T, k);
  linear<K>(pool, w.v_proj, nKV * D, hidden, hin, T, s.v);
  if constexpr (kQkNorm) {
    head_rms_norm<K>(pool, s.q_raw, w.q_norm, s.q, T, nH, D, eps);
    head_rms_norm<K>(pool, s.k_raw, w.k_norm, s.k, T, nKV, D, eps);
  }
  apply_rotary<K>(pool, rotary, s.q, T, std::size_t(nH) * D, nH, D, first_position);
  apply_rotary<K>(pool, rotary, s.k, T, std::size_t(nKV) * D, nKV, D, first_position);
  store_kv(cache, seq, layer, first_position, T, s.k, s.v, nKV, D);
  causal_attention<K>(pool, cache, seq, layer, dims, s.q, T, first_position, s.attn, s.scores);
  const MatmulInput<N>* ain = matmul_input<K, N>(pool, s.attn, std::size_t(T) * nH * D, s.rounded);
  linear<K>(pool, w.o_proj, hidden, nH * D, ain, T, out);
}

}  // namespace mi::model
