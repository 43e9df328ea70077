// Grouped-query causal self-attention over the KV cache (Ainslie et al. 2023, GQA; MHA when kv_heads == heads).
//
// One call handles T new tokens of one sequence whose positions are [first_position, first_position + T):
// a prefill of any length appended to an existing cache, or a single decode token (T = 1). The new tokens'
// keys/values must already be in the cache (store_kv) - so query t sees positions [0, first_position + t].
// Query head h reads KV head h / (heads / kv_heads). Scores are q.k / sqrt(head_dim) in f32, softmax in f32
// (max-subtracted), output = sum_j p_j v_j - the eager attention of the f32 reference.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace mi::model {

struct AttentionDims {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// Copies the new tokens' keys and values into the cache at positions [first_position, first_position + T).
//   k, v [T, kv_heads * head_dim] (row stride kv_heads * head_dim); the positions must be appended already.
inline void store_kv(runtime::KvCache& cache, int seq, int layer, int first_position, int T, const float* k,
                     const float* v, int kv_heads, int head_dim) {
  const std::size_t row_floats = std::size_t(kv_heads) * std::size_t(head_dim);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < kv_heads; ++h) {
      const std::size_t offset = std::size_t(t) * row_floats + std::size_t(h) * head_dim;
      std::memcpy(cache.key(seq, layer, h, first_position + t), k + offset, sizeof(float) * std::size_t(head_dim));
      std::memcpy(cache.value(seq, layer, h, first_position + t), v + offset, sizeof(float) * std::size_t(head_dim));
    }
  }
}

// Floats of score scratch causal_attention needs: one row of max_context scores per pool thread.
inline std::size_t attention_scratch_floats(int threads, int max_context) {
  return std::size_t(threads) * std::size_t(max_context);
}

namespace detail {
// One query head against positions [0, n) of one KV head of `seq`: scores (scaled dot products) into s[0, n),
// softmax, then the probability-weighted sum of the values into oh [head_dim].
template <class K>
void attend_head(const runtime::KvCache& cache, int seq, int layer, int kv_h, const float* qh, int n, int head_dim,
                 float scale, float* s, float* oh) {
  for (int p = 0; p < n;) {
    const runtime::KvCache::HeadSpan span = cache.head_span(seq, layer, kv_h, p, n);
    for (int j = 0; j < span.tokens; ++j) s[p + j] = K::dot(qh, span.keys + std::size_t(j) * head_dim, head_dim) * scale;
    p += span.tokens;
  }
  K::softmax(s, n);
  std::memset(oh, 0, sizeof(float) * std::size_t(head_dim));
  for (int p = 0; p < n;) {
    const runtime::KvCache::HeadSpan span = cache.head_span(seq, layer, kv_h, p, n);
    for (int j = 0; j < span.tokens; ++j) K::axpy(s[p + j], span.values + std::size_t(j) * head_dim, oh, head_dim);
    p += span.tokens;
  }
}
}  // namespace detail

//   q   [T, heads * head_dim] (rotary already applied)
//   out [T, heads * head_dim]
//   scores: attention_scratch_floats(pool.threads(), cache max_context) floats
template <class K>
void causal_attention(runtime::ThreadPool& pool, const runtime::KvCache& cache, int seq, int layer,
                      const AttentionDims& dims, const float* q, int T, int first_position, float* out,
                      float* scores) {
  const int heads = dims.heads, kv_heads = dims.kv_heads, head_dim = dims.head_dim;
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0 || heads % kv_heads != 0)
    fail("attention: heads (", heads, ") must be a positive multiple of kv_heads (", kv_heads, ")");
  if (kv_heads != cache.shape().kv_heads || head_dim != cache.shape().head_dim)
    fail("attention: kv_heads ", kv_heads, " / head_dim ", head_dim, " do not match the KV cache (",
         cache.shape().kv_heads, " / ", cache.shape().head_dim, ")");
  if (first_position < 0 || T < 0 || first_position + T > cache.length(seq))
    fail("attention: positions [", first_position, ", ", first_position + T, ") are not in the KV cache (length ",
         cache.length(seq), ")");
  const int group = heads / kv_heads;
  const std::size_t row_floats = std::size_t(heads) * std::size_t(head_dim);
  const std::size_t max_context = std::size_t(cache.shape().max_context);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));

  pool.parallel_chunks(T * heads, 1, [&](int chunk, int begin, int end) {
    float* s = scores + std::size_t(chunk) * max_context;
    for (int item = begin; item < end; ++item) {
      const int t = item / heads, h = item % heads;
      detail::attend_head<K>(cache, seq, layer, h / group, q + std::size_t(t) * row_floats + std::size_t(h) * head_dim,
                             first_position + t + 1, head_dim, scale, s,
                             out + std::size_t(t) * row_floats + std::size_t(h) * head_dim);
    }
  });
}

// Batched decode: row b of q is the one new token of sequence seqs[b], at position length(seqs[b]) - 1 (its key and
// value already stored). One pool dispatch covers every (row, head) pair, so B sequences cost one wake-up per layer,
// not B. Each row attends only to its own sequence's cache; the per-head arithmetic is the one causal_attention
// does, so a row's output equals causal_attention over that sequence alone.
template <class K>
void decode_attention_batch(runtime::ThreadPool& pool, const runtime::KvCache& cache, const int* seqs, int B,
                            int layer, const AttentionDims& dims, const float* q, float* out, float* scores) {
  const int heads = dims.heads, kv_heads = dims.kv_heads, head_dim = dims.head_dim;
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0 || heads % kv_heads != 0)
    fail("attention: heads (", heads, ") must be a positive multiple of kv_heads (", kv_heads, ")");
  if (kv_heads != cache.shape().kv_heads || head_dim != cache.shape().head_dim)
    fail("attention: kv_heads ", kv_heads, " / head_dim ", head_dim, " do not match the KV cache (",
         cache.shape().kv_heads, " / ", cache.shape().head_dim, ")");
  for (int b = 0; b < B; ++b)
    if (cache.length(seqs[b]) < 1) fail("attention: sequence ", seqs[b], " (row ", b, ") has no token in the KV cache");
  const int group = heads / kv_heads;
  const std::size_t row_floats = std::size_t(heads) * std::size_t(head_dim);
  const std::size_t max_context = std::size_t(cache.shape().max_context);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  pool.parallel_chunks(B * heads, 1, [&](int chunk, int begin, int end) {
    float* s = scores + std::size_t(chunk) * max_context;
    for (int item = begin; item < end; ++item) {
      const int b = item / heads, h = item % heads;
      detail::attend_head<K>(cache, seqs[b], layer, h / group, q + std::size_t(b) * row_floats + std::size_t(h) * head_dim,
                             cache.length(seqs[b]), head_dim, scale, s,
                             out + std::size_t(b) * row_floats + std::size_t(h) * head_dim);
    }
  });
}

}  // namespace mi::model
