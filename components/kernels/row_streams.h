// The order in which a matrix-vector kernel visits its output rows, shared by the kernels that tile rows, and the
// software prefetches the x86 levels share (weight rows of the decode kernels, key/value rows of attention).
//
// A tile of R rows reads R weight rows side by side. When those are R adjacent rows of a row-major matrix, each is a
// short stream (2 KiB for 1024 bf16 columns) that ends before a hardware prefetcher has learned it. Taking the R
// rows from R far-apart groups instead (n = rows / R; tile i holds rows i, n + i, ..., (R - 1) n + i) makes the
// tiles walk R long sequential streams, one per group, which the prefetchers follow. Rows past R * n go one by one.
// The rows a tile holds never change what an output row computes, so results do not depend on this order.
#pragma once
#include <xmmintrin.h>  // _mm_prefetch (SSE: every x86-64 level)

#include <cstddef>
#include <cstdint>

namespace mi::kernels {

// How far ahead each stream is prefetched where a level prefetches its streams (the AVX-512 bf16 and int8 decode
// kernels; the AVX2 ones rely on the hardware prefetchers). Measured on AMD Zen 5: experience OPT-014.
constexpr std::size_t kStreamPrefetchBytes = 2048;

// Where the AVX-512 decode kernels prefetch their weights, 1 (default) into L2 (PREFETCHT1) or 0 into L1
// (PREFETCHT0), in two tuning parameters (ckb/platforms [[tuning]]), because the better hint depends on how many
// tokens a block computes per weight read:
//   MI_TUNE_DOT_PREFETCH    blocks of fewer than kBatchPrefetchTokens tokens (one sequence's decode, small batches:
//                           a pure weight stream);
//   MI_TUNE_BATCH_PREFETCH  blocks of kBatchPrefetchTokens to 8 tokens (batched decode, and prefills that short: each
//                           weight vector feeds T multiply-adds).
// An L1 prefetch holds one of the core's few L1 miss buffers until its line arrives, which caps the lines in flight;
// an L2 prefetch is tracked by the L2's larger queue, and the loads then hit L2. Measured on AMD Zen 4 (EPYC, 2
// threads, 28 layers of the 0.6B shape = 840 MB of bf16 weights streamed, experience OPT-017): 8 tokens 41-44 ->
// 30-31 ms with the VDPBF16PS dot form and 47-49 -> 41-47 with FMA, 4 tokens 33-36 -> 28-30 ms, one token unchanged
// (26-29 ms); one thread, 8 tokens 79-80 -> 52-54 ms. On AMD Zen 5 the two differ by a few per cent either way
// and not always in the same direction at one token and at eight (experience OPT-036), so one parameter timed on
// the sum of both was chosen by noise.
#ifndef MI_TUNE_DOT_PREFETCH
#define MI_TUNE_DOT_PREFETCH 1
#endif
#ifndef MI_TUNE_BATCH_PREFETCH
#define MI_TUNE_BATCH_PREFETCH 1
#endif
static_assert(MI_TUNE_DOT_PREFETCH == 0 || MI_TUNE_DOT_PREFETCH == 1, "MI_TUNE_DOT_PREFETCH: 0 or 1");
static_assert(MI_TUNE_BATCH_PREFETCH == 0 || MI_TUNE_BATCH_PREFETCH == 1, "MI_TUNE_BATCH_PREFETCH: 0 or 1");
// The block size from which MI_TUNE_BATCH_PREFETCH applies; ckb/platforms [[tuning]] min_tokens says the same, so
// the tuner times that parameter only for engines that decode this many tokens at once.
constexpr int kBatchPrefetchTokens = 4;
namespace {  // internal linkage: levels compiled with different ISA flags include this header
// A weight line for a block of T tokens.
template <int T>
inline void prefetch_weights(const void* p) {
  constexpr int to_l2 = T < kBatchPrefetchTokens ? MI_TUNE_DOT_PREFETCH : MI_TUNE_BATCH_PREFETCH;
  _mm_prefetch(static_cast<const char*>(p), to_l2 == 1 ? _MM_HINT_T1 : _MM_HINT_T0);
}
}  // namespace

// How far ahead the attention kernels (AVX-512 and AVX2 levels) prefetch the key and value rows they stream, into
// L2 (PREFETCHT1; one prefetch per cache line read, kKvPrefetchBytes further on; experience OPT-018). A decode step
// reads each head's keys and values once, when this was measured in runs of a KV block (16 positions x head_dim f32 =
// 8 KiB per head for Qwen3-0.6B; now runs of a block group, runtime/kv_cache.h) that the hardware prefetchers
// pick up too late (and, when this was measured, the scores kernel walked its 16 rows column by column). Measured on
// AMD Zen 4 (EPYC, 2 threads, the Qwen3-0.6B KV shape: 28 layers x 8 KV heads x 128, f32, blocks of 16 positions, one
// decode query per head pair, medians of 40 steps): 256 positions 4.0-5.2 -> 2.1-2.8 ms (14 -> 21-27 GB/s), 1024
// positions 16.9 -> 11.6 ms; 2 KiB ahead gave 3.8-4.5 ms, 4 KiB 3.2-3.3, 16 KiB 2.8-3.0, PREFETCHT0 at 8 KiB 3.7-3.9.
// With head_dim 128 the distance is one span: the same head's keys of the next block of its group, which is the
// sequence's next block when its blocks are consecutive (runtime/kv_cache.h; else whatever follows in the cache, or
// past its mapping: PREFETCHh never faults). The measurements here predate that layout (the distance then reached
// the next head of the block). The address is formed as an integer, so no pointer is taken past its allocation.
// Re-checked on AMD Zen 5 (session 25, 1024 positions, still with the column walk): none, 4 KiB and 8 KiB into L1,
// 16 and 32 KiB into L2 were the same or slower than 8 KiB into L2; again with the decode walk going group by group
// (experience OPT-039): 4 and 16 KiB slower than 8.
constexpr std::size_t kKvPrefetchBytes = 8192;
namespace {  // internal linkage, as prefetch_weights
inline void prefetch_kv(const void* row) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(row) + kKvPrefetchBytes), _MM_HINT_T1);
}
// Whether the kernels prefetch at element `i` (a multiple of 16) of a K/V row of head_dim d with elements E: every
// 16 elements, one f32 line; for bf16 rows every 32 (one line) when d is a multiple of 32, as the cache's rows then
// start on a line, else every 16 (two prefetches per line). In the cache's layout (runtime/kv_cache.h) this reaches
// every line of rows whose head_dim is a multiple of 8; other head dims or strides may leave a row's last line to the
// hardware prefetchers (as before for f32), which costs time, never correctness.
template <class E>
inline bool kv_line_start(int i, int d) {
  return sizeof(E) == 4 || d % 32 != 0 || i % 32 == 0;
}
}  // namespace

// tile(first_row, group_rows): rows first_row + g * group_rows for g < R. one(row): a single row.
template <int R, class Tile, class One>
inline void for_row_streams(int rows, Tile&& tile, One&& one) {
  const int n = rows / R;
  for (int i = 0; i < n; ++i) tile(i, n);
  for (int r = R * n; r < rows; ++r) one(r);
}

}  // namespace mi::kernels
