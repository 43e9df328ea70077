// Grouped-query causal self-attention over the KV cache (Ainslie et al. 2023, GQA; MHA when kv_heads == heads).
//
// One call handles T new tokens of one sequence whose positions are [first_position, first_position + T):
// a prefill of any length appended to an existing cache, or a single decode token (T = 1). The new tokens'
// keys/values must already be in the cache (store_kv) - so query t sees positions [0, first_position + t].
// Query head h reads KV head h / (heads / kv_heads). Scores are q.k / sqrt(head_dim) in f32, softmax in f32
// (max-subtracted), output = sum_j p_j v_j - the eager attention of the f32 reference.
//
// Keys and values are cached as E: float, or bf16_t in fast numerics when runtime.kv_dtype = "bf16" (KvElement; the
// cache's dtype must match, else mi::Error). bf16 rows are rounded once when stored (round-to-nearest-even, K::to_bf16) and
// widened exactly when read, so scores, softmax and value sums stay f32; ckb/contracts/kv_cache.toml states the
// accuracy. Every function below is templated on E and walks the cache the same way for both.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "common/bf16.h"
#include "common/error.h"
#include "kernels/kernel_api.h"
#include "model/linear.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace mi::model {

// The bf16 KV cache's element in numerics N (runtime.kv_dtype = "bf16"): fast stores bf16 keys and values, precise
// keeps f32. An engine with kv_dtype = "f32" caches f32 in both.
template <Numerics N>
using KvElement = std::conditional_t<N == Numerics::precise, float, bf16_t>;

struct AttentionDims {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// Stores the new tokens' keys and values in the cache at positions [first_position, first_position + T): copied
// (E = float) or rounded to bf16 (E = bf16_t).
//   k, v [T, kv_heads * head_dim] (row stride kv_heads * head_dim); the positions must be appended already.
template <class K, class E = float>
void store_kv(runtime::KvCache& cache, int seq, int layer, int first_position, int T, const float* k, const float* v,
              int kv_heads, int head_dim) {
  const std::size_t row_floats = std::size_t(kv_heads) * std::size_t(head_dim);
  const auto put = [&](const float* src, E* dst) {
    if constexpr (std::is_same_v<E, float>) std::memcpy(dst, src, sizeof(float) * std::size_t(head_dim));
    else K::to_bf16(src, dst, head_dim);
  };
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < kv_heads; ++h) {
      const std::size_t offset = std::size_t(t) * row_floats + std::size_t(h) * head_dim;
      put(k + offset, cache.key<E>(seq, layer, h, first_position + t));
      put(v + offset, cache.value<E>(seq, layer, h, first_position + t));
    }
  }
}

// store_kv for a prefill: the tokens split across the pool in runs that end where the cache's block groups do
// (positions that are multiples of group_positions(): the start's partial group, then one group per run, the last
// cut at T). A sequence's blocks are consecutive in their groups wherever the cache could keep them so, and a
// group's head runs share their huge pages (runtime/kv_cache.h), so each thread then mostly writes memory of its own
// (not where the sequence's first block did not start a group - adopted prefix blocks, a fragmented pool - and the
// mapping is not 2 MiB aligned, so a huge page may straddle two groups; a start inside a group puts that partial
// run, usually resident already, on the calling thread and the fresh groups on the others). Why:
// a prefill writes cache memory the process may never have touched, and first touch is the cost (the kernel zeroes
// each page; in a VM the host may have to back it first), which two threads pay in about half the time; resident
// memory is written at memcpy speed either way (experience OPT-033). Tokens within one group stay on the calling
// thread (a decode step's, a short prompt's or chunk's). Every row is the same copy or rounding whoever writes it.
template <class K, class E = float>
void store_kv(runtime::ThreadPool& pool, runtime::KvCache& cache, int seq, int layer, int first_position, int T,
              const float* k, const float* v, int kv_heads, int head_dim) {
  const int block = std::max(1, cache.group_positions());  // positions per run
  const int head = (block - first_position % block) % block;  // tokens left in the start's group (0: on a boundary)
  const int lead = head > 0 ? 1 : 0;                            // that partial group is run 0, when there is one
  const int runs = lead + (T - head + block - 1) / block;       // T - head > -block, so the quotient is >= 0
  if (runs < 2) return store_kv<K, E>(cache, seq, layer, first_position, T, k, v, kv_heads, head_dim);
  const auto run_start = [&](int r) { return r == 0 ? 0 : std::min(T, head + (r - lead) * block); };
  const std::size_t row_floats = std::size_t(kv_heads) * std::size_t(head_dim);
  pool.parallel_for(runs, 1, [&](int r0, int r1) {
    const int t0 = run_start(r0), t1 = run_start(r1);
    store_kv<K, E>(cache, seq, layer, first_position + t0, t1 - t0, k + std::size_t(t0) * row_floats,
                   v + std::size_t(t0) * row_floats, kv_heads, head_dim);
  });
}

// Queries processed together against each block of keys and values (see causal_attention).
constexpr int kAttentionQueryBlock = 16;

// Floats between two queries' score rows: max_context rounded up to an odd number of cache lines. A block's rows are
// walked side by side (each span's scores of every query, then each span's probabilities), and rows a power of two
// apart (4096 positions = 16 KiB) would all fall in the same L1 sets: more rows than the cache has ways, so every
// row's line would evict another's.
inline std::size_t score_row_stride(int max_context) {
  const std::size_t lines = (std::size_t(std::max(max_context, 0)) + 15) / 16;
  return (lines | 1) * 16;  // an odd number of lines: 16 rows fall in 16 different sets for every max_context
}

// Floats of score scratch causal_attention needs: kAttentionQueryBlock score rows per pool thread.
inline std::size_t attention_scratch_floats(int threads, int max_context) {
  return std::size_t(threads) * std::size_t(kAttentionQueryBlock) * score_row_stride(max_context);
}

namespace detail {
// Queries qi[0, n_items) that share KV head kv_h of `seq`, query i attending to positions [0, len[i]): the cache is
// walked once for all of them, every page of keys (then of values) used by every query while it sits in L1. Scores
// of query i go to s + i * s_stride (softmax in place), its output to oi[i] [head_dim]. Each query's result is the
// same sum in the same order as walking the cache for it alone.
template <class K, class E>
void attend_block(const runtime::KvCache& cache, int seq, int layer, int kv_h, const float* const* qi,
                  float* const* oi, const int* len, int n_items, int head_dim, float scale, float* s,
                  std::size_t s_stride) {
  int longest = 0;
  for (int i = 0; i < n_items; ++i) longest = std::max(longest, len[i]);
  // Scores: the block's queries are laid out once for the level (attention_prepare_queries), then each span of keys
  // is scored for all of them in one call, query i taking the span's first len[i] - p keys clamped to [0, tokens] -
  // the diagonal span's queries included. A head wider than the prepared form takes the one-query kernel.
  // Stack: 32 KiB here (and 32 KiB more inside the AVX-512 kernel for a bf16 cache's widened keys).
  static_assert(kAttentionQueryBlock <= kernels::kAttentionPreparedMaxQueries);
  alignas(64) float prepared[kernels::kAttentionPreparedMaxQueries * kernels::kAttentionPreparedMaxHeadDim];
  const bool use_prepared = head_dim <= kernels::kAttentionPreparedMaxHeadDim;
  if (use_prepared) K::attention_prepare_queries(qi, n_items, head_dim, prepared);
  for (int p = 0; p < longest;) {
    const auto span = cache.head_span<E>(seq, layer, kv_h, p, longest);
    int keys[kAttentionQueryBlock];
    float* rows[kAttentionQueryBlock];
    for (int i = 0; i < n_items; ++i) {
      keys[i] = std::clamp(len[i] - p, 0, span.tokens);
      rows[i] = s + std::size_t(i) * s_stride + p;
    }
    const std::size_t hd = std::size_t(head_dim);
    if (use_prepared) {
      K::attention_scores_prepared(prepared, n_items, span.keys, hd, keys, head_dim, scale, rows);
    } else {
      for (int i = 0; i < n_items; ++i)
        if (keys[i] > 0) K::attention_scores(qi[i], span.keys, hd, keys[i], head_dim, scale, rows[i]);
    }
    p += span.tokens;
  }
  // Values: per span, the queries that see all of it go to the level's multi-query kernel together (each query's
  // result the single kernel's, bitwise), the ones whose causal end falls inside it one by one.
  const float* whole_in[kAttentionQueryBlock];  // probability rows
  float* whole_o[kAttentionQueryBlock];
  for (int i = 0; i < n_items; ++i) {
    K::softmax(s + std::size_t(i) * s_stride, len[i]);
    std::memset(oi[i], 0, sizeof(float) * std::size_t(head_dim));
  }
  for (int p = 0; p < longest;) {
    const auto span = cache.head_span<E>(seq, layer, kv_h, p, longest);
    int whole = 0;
    for (int i = 0; i < n_items; ++i) {
      const float* pi = s + std::size_t(i) * s_stride + p;
      if (p + span.tokens <= len[i]) {
        whole_in[whole] = pi;
        whole_o[whole++] = oi[i];
      } else if (p < len[i]) {
        K::attention_values(pi, span.values, std::size_t(head_dim), len[i] - p, head_dim, oi[i]);
      }
    }
    K::attention_values_multi(whole_in, whole, span.values, std::size_t(head_dim), span.tokens, head_dim, whole_o);
    p += span.tokens;
  }
}

// Starts the read of a span of rows (tokens x head_dim floats) that the decode walk reaches next but that does not
// follow on in memory: its first kilobyte is prefetched, and the hardware prefetchers carry the rest of the run. They
// do not follow the jump to the next block group, or to a block the pool placed elsewhere (a fragmented pool;
// runtime/kv_cache.h), so without this such a span starts with a stall. Measured when every block
// was its own run, 3.5 MiB apart (Qwen3-0.6B KV shape, 28 layers at 2048 positions, 2 threads, AMD Zen 5, -O3):
// avx512bf16 29.5-30.6 GB/s with 1 KiB, 26.0-26.9 with the whole 8 KiB span, 26.0 with none;
// avx2 22.7-24.0 vs 20.2-20.5 for the per-head walk without prefetch.
// (Those measurements prefetched every block's span; since OPT-039 only the jumps are.)
// A bf16 cache's span (4 KiB at 16 positions x 128) is prefetched whole into L2 instead (experience OPT-026; AMD
// Zen 4, 2 threads, harness `kvd`, 28 layers, six alternated rounds: B = 1 at 2000 positions 12.7-18.3 -> 9.5-14.1
// ms, B = 8 at 1000 positions 48.1-61.2 -> 39.5-55.8 ms); for f32 rows the same change was within the noise (B = 1
// at 300 positions slightly slower), so they keep the 1 KiB into L1.
constexpr std::size_t kSpanPrefetchBytes = 1024;
template <class E>
inline void prefetch_span(const E* rows, int tokens, int head_dim) {
  const char* p = reinterpret_cast<const char*>(rows);
  const std::size_t span_bytes = std::size_t(tokens) * std::size_t(head_dim) * sizeof(E);
  if constexpr (std::is_same_v<E, bf16_t>) {
    for (std::size_t o = 0; o < span_bytes; o += 64) __builtin_prefetch(p + o, 0, 2);  // locality 2: L2 (PREFETCHT1)
  } else {
    const std::size_t bytes = std::min(kSpanPrefetchBytes, span_bytes);
    for (std::size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
  }
}

// Decode: the one new query of KV heads [h0, h1) of `seq` (group query heads each, (h1 - h0) * group <=
// kAttentionQueryBlock), attending to positions [0, len). q / out point at the token's row ([heads * head_dim]).
// Keys (then values) are walked once for the whole head range, one block group's positions at a time and head by
// head within it, so a thread reads its share of a group as one sequential run where the sequence's blocks fill
// their groups in order (the walk's order is all that changes; before, block by block with the thread's heads side
// by side. AMD Zen 5, 2 threads, the Qwen3-0.6B KV shape in f32, harness over 28 layers, medians, rounds alternated
// on a noisy host: 1 sequence at 256 positions 1.10-1.31 -> 0.89-1.01 ms, at 1024 4.8-5.9 -> 3.9-4.4, 8 sequences
// at 256 10.2-13.2 -> 7.6-8.4; experience OPT-039). Scores go to s + i * s_stride (i = (h - h0) * group + g).
// Every query's scores, softmax and value sum are the same kernel calls on the same spans (blocks) in the same order
// as attend_block walking its head alone, so the result depends on neither the range nor the walk's order.
// One query per kernel call on purpose: the first query of a span streams it from memory with one FMA per element
// loaded, the others reuse it from L1. Two-query kernels sharing each key and value load (scores: 8 keys x 2 queries
// = 16 accumulators, one transpose; values: 2 queries x 8 vectors; the same sums bitwise) were faster with the cache
// in L2/L3 but slower from DRAM. AMD Zen 5, 2 threads, Qwen3-0.6B KV shape, f32, medians of decode_attention_batch
// over 28 layers: the same layer 28 times (in cache), one sequence at 256 positions 0.754 -> 0.631 ms, at 1000 3.21
// -> 2.87; 28 distinct layers (DRAM) at 1000 positions 7.0-7.3 -> 7.8-8.0 ms with both kernels, 6.0-6.1 -> 6.4 with
// the two-query values kernel only (another round), within the noise with the scores kernel only; 8 sequences at
// 1000 42.7 -> 58.7 ms, at 140 5.5 -> 6.8. Twice the FMAs per line loaded slowed the stream down more than the shared
// loads saved.
template <class K, class E>
void attend_decode_heads(const runtime::KvCache& cache, int seq, int layer, int h0, int h1, int group,
                         const float* q, float* out, int len, int head_dim, float scale, float* s,
                         std::size_t s_stride) {
  const std::size_t hd = std::size_t(head_dim);
  const auto row = [&](int h, int g) { return (std::size_t(h) * std::size_t(group) + std::size_t(g)) * hd; };
  const auto scores_of = [&](int h, int g) { return s + (std::size_t(h - h0) * std::size_t(group) + g) * s_stride; };
  // Positions [0, len) in windows of the cache's block groups; in each window head by head, each head's spans in
  // position order. A window is a whole number of blocks (group_positions() = blocks per group x block_size), so the
  // spans are the blocks', as in a walk of one head (the kernels' sums depend on where a span starts and ends). Where
  // a sequence's blocks fill its groups in order (runtime/kv_cache.h) a thread's heads of one window are adjacent
  // runs, read as one sequential run; the span that comes next in this order is started (prefetch_span) only where
  // it does not follow on in memory - the next group, or a block the pool placed elsewhere - as the hardware
  // prefetchers carry a sequential run but not such a jump.
  const int window = cache.group_positions();
  struct Cursor {
    int h, p, w0;  // head, first position of its span, window start; h == h1 past the end
  };
  const auto after = [&](const Cursor& c, int span_end) -> Cursor {
    const int w1 = std::min(len, c.w0 + window);
    if (span_end < w1) return {c.h, span_end, c.w0};
    if (c.h + 1 < h1) return {c.h + 1, c.w0, c.w0};
    return w1 < len ? Cursor{h0, w1, w1} : Cursor{h1, len, len};
  };
  const auto span_at = [&](const Cursor& c) {
    return cache.head_span<E>(seq, layer, c.h, c.p, std::min(len, c.w0 + window));
  };
  const auto walk = [&](bool values, auto&& use) {
    Cursor c{h0, 0, 0};  // len >= 1 and h0 < h1 (decode_rows)
    auto span = span_at(c);
    for (;;) {
      const E* rows = values ? span.values : span.keys;
      const Cursor n = after(c, c.p + span.tokens);
      const bool more = n.h < h1;
      decltype(span) next{};
      if (more) {
        next = span_at(n);
        const E* next_rows = values ? next.values : next.keys;
        if (next_rows != rows + std::size_t(span.tokens) * hd) prefetch_span(next_rows, next.tokens, head_dim);
      }
      use(c.h, rows, c.p, span.tokens);
      if (!more) return;
      c = n;
      span = next;
    }
  };
  walk(false, [&](int h, const E* keys, int p, int tokens) {
    for (int g = 0; g < group; ++g)
      K::attention_scores(q + row(h, g), keys, hd, tokens, head_dim, scale, scores_of(h, g) + p);
  });
  for (int h = h0; h < h1; ++h)
    for (int g = 0; g < group; ++g) {
      K::softmax(scores_of(h, g), len);
      std::memset(out + row(h, g), 0, sizeof(float) * hd);
    }
  walk(true, [&](int h, const E* values, int p, int tokens) {
    for (int g = 0; g < group; ++g)
      K::attention_values(scores_of(h, g) + p, values, hd, tokens, head_dim, out + row(h, g));
  });
}

// One decode token per sequence seqs[b] (row b of q / out): items (b, KV head) in b-major order, split across the
// pool in contiguous chunks; a chunk's items of one sequence are walked together, kAttentionQueryBlock queries at a
// time (attend_decode_heads). Groups larger than a walk split into several walks of one head's queries.
template <class K, class E>
void decode_rows(runtime::ThreadPool& pool, const runtime::KvCache& cache, const int* seqs, int B, int layer,
                 const AttentionDims& dims, const float* q, float* out, float* scores) {
  const int heads = dims.heads, kv_heads = dims.kv_heads, head_dim = dims.head_dim;
  const int group = heads / kv_heads;
  const std::size_t row_floats = std::size_t(heads) * std::size_t(head_dim);
  const std::size_t s_stride = score_row_stride(cache.shape().max_context);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  const int heads_per_walk = std::max(1, kAttentionQueryBlock / group);
  pool.parallel_chunks(B * kv_heads, 1, [&](int chunk, int begin, int end) {
    float* s = scores + std::size_t(chunk) * kAttentionQueryBlock * s_stride;
    for (int item = begin; item < end;) {
      const int b = item / kv_heads, h0 = item % kv_heads;
      const int h1 = std::min({kv_heads, h0 + heads_per_walk, h0 + (end - item)});
      const float* qb = q + std::size_t(b) * row_floats;
      float* ob = out + std::size_t(b) * row_floats;
      const int n = cache.length(seqs[b]);
      if (group <= kAttentionQueryBlock) {
        attend_decode_heads<K, E>(cache, seqs[b], layer, h0, h1, group, qb, ob, n, head_dim, scale, s, s_stride);
      } else {  // one head's queries, kAttentionQueryBlock at a time
        for (int g0 = 0; g0 < group; g0 += kAttentionQueryBlock) {
          const int count = std::min(kAttentionQueryBlock, group - g0);
          const float* qi[kAttentionQueryBlock];
          float* oi[kAttentionQueryBlock];
          int len[kAttentionQueryBlock];
          for (int i = 0; i < count; ++i) {
            const std::size_t h = std::size_t(h0) * group + g0 + i;
            qi[i] = qb + h * head_dim;
            oi[i] = ob + h * head_dim;
            len[i] = n;
          }
          attend_block<K, E>(cache, seqs[b], layer, h0, qi, oi, len, count, head_dim, scale, s, s_stride);
        }
      }
      item += h1 - h0;
    }
  });
}
// The head shape against the cache's, and E against its element type: mi::Error before any work.
template <class E>
void check_cache(const runtime::KvCache& cache, const AttentionDims& dims) {
  const int heads = dims.heads, kv_heads = dims.kv_heads, head_dim = dims.head_dim;
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0 || heads % kv_heads != 0)
    fail("attention: heads (", heads, ") must be a positive multiple of kv_heads (", kv_heads, ")");
  if (kv_heads != cache.shape().kv_heads || head_dim != cache.shape().head_dim)
    fail("attention: kv_heads ", kv_heads, " / head_dim ", head_dim, " do not match the KV cache (",
         cache.shape().kv_heads, " / ", cache.shape().head_dim, ")");
  if (cache.dtype() != runtime::kv_dtype_of<E>())
    fail("attention: the KV cache holds ", runtime::kv_dtype_name(cache.dtype()), " keys and values; this attention reads ",
         runtime::kv_dtype_name(runtime::kv_dtype_of<E>()));
}
}  // namespace detail

//   q   [T, heads * head_dim] (rotary already applied)
//   out [T, heads * head_dim]
//   scores: attention_scratch_floats(pool.size(), cache max_context) floats
//
// Work items are (query head, token) pairs in head-major order; the query heads that share a KV head are adjacent.
// A thread claims blocks of up to kAttentionQueryBlock consecutive items of one KV head and walks the
// cache once for all of them: every page of keys (then of values) is loaded from memory once and used by every
// query of the block while it sits in L1. One query per pass (the plain loop) reads each K/V byte for a single
// multiply-add and runs at L2/DRAM speed: a 1021-token prefill of Qwen3-0.6B spent 60% of its time there. Each
// query's result is the same sum in the same order as the plain loop, so the blocking does not change the numbers.
// A decode step (T = 1 at the cache's last position) is walked as decode_attention_batch walks one row: per thread a
// range of KV heads, walked block group by block group and head by head within one (detail::attend_decode_heads), or
// per head in blocks of kAttentionQueryBlock queries when a KV head has more query heads than that (attend_block);
// the same numbers either way.
template <class K, class E = float>
void causal_attention(runtime::ThreadPool& pool, const runtime::KvCache& cache, int seq, int layer,
                      const AttentionDims& dims, const float* q, int T, int first_position, float* out,
                      float* scores) {
  detail::check_cache<E>(cache, dims);
  const int heads = dims.heads, kv_heads = dims.kv_heads, head_dim = dims.head_dim;
  if (first_position < 0 || T < 0 || first_position + T > cache.length(seq))
    fail("attention: positions [", first_position, ", ", first_position + T, ") are not in the KV cache (length ",
         cache.length(seq), ")");
  if (T == 1 && first_position + 1 == cache.length(seq))  // a decode step: the last position's query
    return detail::decode_rows<K, E>(pool, cache, &seq, 1, layer, dims, q, out, scores);
  const int group = heads / kv_heads;
  const std::size_t row_floats = std::size_t(heads) * std::size_t(head_dim);
  const std::size_t s_stride = score_row_stride(cache.shape().max_context);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  // Blocks of up to kAttentionQueryBlock items of one KV head, claimed from a shared counter (as for_row_blocks
  // does for linear layers): a thread the host delays holds up one block, not a fixed half of the heads. Claimed
  // from the last block down, so the long causal rows go first and the short ones even out the end. Each query's
  // result does not depend on its block or thread (attend_block), so the split changes no number.
  const int items_per_kv_head = group * T;
  const int blocks_per_kv_head = (items_per_kv_head + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  const int n_blocks = kv_heads * blocks_per_kv_head;
  std::atomic<int> claimed{0};
  pool.parallel_chunks(pool.chunk_count(n_blocks, 1), 1, [&](int chunk, int, int) {
    float* s = scores + std::size_t(chunk) * kAttentionQueryBlock * s_stride;
    for (int c = claimed.fetch_add(1, std::memory_order_relaxed); c < n_blocks;
         c = claimed.fetch_add(1, std::memory_order_relaxed)) {
      const int block = n_blocks - 1 - c;
      const int kv_h = block / blocks_per_kv_head;
      const int b0 = kv_h * items_per_kv_head + (block % blocks_per_kv_head) * kAttentionQueryBlock;
      const int b1 = std::min(b0 + kAttentionQueryBlock, (kv_h + 1) * items_per_kv_head);
      const float* qi[kAttentionQueryBlock];
      float* oi[kAttentionQueryBlock];
      int len[kAttentionQueryBlock];  // causal: item i attends to positions [0, len[i])
      for (int i = 0; i < b1 - b0; ++i) {
        const int h = (b0 + i) / T, t = (b0 + i) % T;
        qi[i] = q + std::size_t(t) * row_floats + std::size_t(h) * head_dim;
        oi[i] = out + std::size_t(t) * row_floats + std::size_t(h) * head_dim;
        len[i] = first_position + t + 1;
      }
      detail::attend_block<K, E>(cache, seq, layer, kv_h, qi, oi, len, b1 - b0, head_dim, scale, s, s_stride);
    }
  });
}

// Batched decode: row b of q is the one new token of sequence seqs[b], at position length(seqs[b]) - 1 (its key and
// value already stored). One pool dispatch covers every (row, KV head) pair, so B sequences cost one wake-up per
// layer, not B; a thread walks the blocks of its KV heads of one sequence once for all their queries
// (detail::decode_rows: block group by block group in attend_decode_heads, or per head in attend_block when a KV
// head has more query heads than one walk holds). Each row attends only to its own sequence's cache; the per-head
// arithmetic is the one causal_attention does, so a row's output equals causal_attention over that sequence alone,
// bitwise.
template <class K, class E = float>
void decode_attention_batch(runtime::ThreadPool& pool, const runtime::KvCache& cache, const int* seqs, int B,
                            int layer, const AttentionDims& dims, const float* q, float* out, float* scores) {
  detail::check_cache<E>(cache, dims);
  for (int b = 0; b < B; ++b)
    if (cache.length(seqs[b]) < 1) fail("attention: sequence ", seqs[b], " (row ", b, ") has no token in the KV cache");
  detail::decode_rows<K, E>(pool, cache, seqs, B, layer, dims, q, out, scores);
}

}  // namespace mi::model
