#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"

using mi::runtime::KvCache;
using mi::runtime::KvCacheShape;

namespace {
KvCacheShape small_shape() {
  KvCacheShape s;
  s.layers = 2;
  s.kv_heads = 3;
  s.head_dim = 4;
  s.max_sequences = 2;
  s.max_context = 10;
  s.block_size = 4;
  return s;
}
}  // namespace

TEST(KvCache, SizesFromShape) {
  KvCache cache(small_shape());
  EXPECT_EQ(cache.total_blocks(), 2u * 3u);  // 2 sequences x ceil(10 / 4)
  EXPECT_EQ(cache.bytes(), 6u * (2 * 2 * 3 * 4 * 4) * sizeof(float));
  EXPECT_EQ(cache.free_blocks(), 6u);
}

// Fast numerics' cache (KvDtype::bf16): half the bytes of the f32 cache of the same shape, rows of bf16_t at the
// same positions, and a read as the wrong element type refused with both names.
TEST(KvCache, Bf16CacheHoldsHalfTheBytesAndChecksTheElementType) {
  KvCacheShape s = small_shape();
  s.dtype = mi::runtime::KvDtype::bf16;
  KvCache cache(s);
  EXPECT_EQ(cache.dtype(), mi::runtime::KvDtype::bf16);
  EXPECT_EQ(cache.bytes(), 6u * (2 * 2 * 3 * 4 * 4) * sizeof(mi::bf16_t));
  const int seq = cache.allocate_sequence();
  cache.append(seq, 6);
  for (int p = 0; p < 6; ++p)
    for (int d = 0; d < 4; ++d) {
      cache.key<mi::bf16_t>(seq, 1, 2, p)[d] = mi::f32_to_bf16(float(16 * p + d));  // exact in bf16 (below 256)
      cache.value<mi::bf16_t>(seq, 1, 2, p)[d] = mi::f32_to_bf16(float(-16 * p - d));
    }
  const KvCache& ro = cache;
  for (int p = 0; p < 6;) {
    const auto span = ro.head_span<mi::bf16_t>(seq, 1, 2, p, 6);
    for (int j = 0; j < span.tokens; ++j)
      for (int d = 0; d < 4; ++d) {
        ASSERT_EQ(mi::bf16_to_f32(span.keys[j * 4 + d]), float(16 * (p + j) + d));
        ASSERT_EQ(mi::bf16_to_f32(span.values[j * 4 + d]), float(-16 * (p + j) - d));
      }
    p += span.tokens;
  }
  // Rows of adjacent positions in one block are head_dim elements apart (2 bytes each here).
  EXPECT_EQ(cache.key<mi::bf16_t>(seq, 1, 2, 1) - cache.key<mi::bf16_t>(seq, 1, 2, 0), 4);
  try {
    cache.key(seq, 0, 0, 0);  // float: the default element type
    FAIL() << "a bf16 cache read as f32";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows are bf16, read as f32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ro.head_span(seq, 0, 0, 0, 6), mi::Error);
  KvCache f32_cache(small_shape());
  const int other = f32_cache.allocate_sequence();
  f32_cache.append(other, 1);
  EXPECT_THROW(f32_cache.value<mi::bf16_t>(other, 0, 0, 0), mi::Error);
}

// runtime.kv_blocks: a pool smaller than the worst case is allocated as asked (memory follows it), holds one whole
// context, and refuses an append past its last block; fewer blocks than one context is refused up front.
TEST(KvCache, PoolSizeFromTotalBlocks) {
  KvCacheShape s = small_shape();
  s.max_sequences = 4;
  s.total_blocks = 4;  // worst case would be 4 x 3
  KvCache cache(s);
  EXPECT_EQ(cache.total_blocks(), 4u);
  EXPECT_EQ(cache.bytes(), 4u * (2 * 2 * 3 * 4 * 4) * sizeof(float));
  const int a = cache.allocate_sequence(), b = cache.allocate_sequence();
  cache.append(a, 10);  // 3 blocks: a whole context
  cache.append(b, 4);   // the last block
  EXPECT_EQ(cache.free_blocks(), 0u);
  EXPECT_THROW(cache.append(b, 1), mi::Error);
  EXPECT_EQ(cache.length(b), 4);  // the failed append changed nothing
  cache.free_sequence(a);
  EXPECT_EQ(cache.append(b, 1), 4);
  s.total_blocks = 2;  // < ceil(10 / 4)
  try {
    KvCache too_small(s);
    ADD_FAILURE() << "a pool that cannot hold one context was accepted";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("total_blocks"), std::string::npos) << e.what();
  }
  s.total_blocks = -1;
  EXPECT_THROW(KvCache{s}, mi::Error);
}

TEST(KvCache, RejectsBadShape) {
  KvCacheShape s = small_shape();
  s.head_dim = 0;
  EXPECT_THROW(KvCache{s}, mi::Error);
  s = small_shape();
  s.block_size = -1;
  EXPECT_THROW(KvCache{s}, mi::Error);
}

TEST(KvCache, AppendWriteReadAcrossBlocks) {
  KvCache cache(small_shape());
  const int seq = cache.allocate_sequence();
  EXPECT_EQ(cache.append(seq, 3), 0);
  EXPECT_EQ(cache.append(seq, 6), 3);
  EXPECT_EQ(cache.length(seq), 9);
  EXPECT_EQ(cache.free_blocks(), 3u);
  auto tag = [](int layer, int kind, int head, int pos, int d) { return float(layer * 10000 + kind * 1000 + head * 100 + pos * 10 + d); };
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h)
      for (int p = 0; p < 9; ++p)
        for (int d = 0; d < 4; ++d) {
          cache.key(seq, l, h, p)[d] = tag(l, 0, h, p, d);
          cache.value(seq, l, h, p)[d] = tag(l, 1, h, p, d);
        }
  const KvCache& ro = cache;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h) {
      int covered = 0;
      for (int p = 0; p < 9;) {
        const auto span = ro.head_span(seq, l, h, p, 9);
        ASSERT_EQ(span.first, p);
        ASSERT_GE(span.tokens, 1);
        ASSERT_LE(span.tokens, 4);
        for (int j = 0; j < span.tokens; ++j)
          for (int d = 0; d < 4; ++d) {
            ASSERT_EQ(span.keys[j * 4 + d], tag(l, 0, h, p + j, d));
            ASSERT_EQ(span.values[j * 4 + d], tag(l, 1, h, p + j, d));
          }
        p += span.tokens;
        covered += span.tokens;
      }
      EXPECT_EQ(covered, 9);
    }
}

TEST(KvCache, ErrorsInsteadOfOverrun) {
  KvCache cache(small_shape());
  const int a = cache.allocate_sequence();
  const int b = cache.allocate_sequence();
  EXPECT_THROW(cache.allocate_sequence(), mi::Error);  // max_sequences = 2
  EXPECT_THROW(cache.append(a, 11), mi::Error);          // > max_context
  EXPECT_EQ(cache.length(a), 0);                         // unchanged after the failure
  cache.append(a, 10);
  EXPECT_THROW(cache.append(a, 1), mi::Error);
  EXPECT_THROW(cache.key(a, 0, 0, 10), mi::Error);  // position beyond length
  EXPECT_THROW(cache.key(a, 2, 0, 0), mi::Error);   // layer out of range
  EXPECT_THROW(cache.key(a, 0, 3, 0), mi::Error);   // kv head out of range
  EXPECT_THROW(cache.key(b, 0, 0, 0), mi::Error);   // b is empty
  EXPECT_THROW(cache.length(7), mi::Error);
  EXPECT_THROW(cache.append(-1, 1), mi::Error);
  EXPECT_THROW(cache.append(a, -1), mi::Error);
  cache.free_sequence(b);
  EXPECT_THROW(cache.length(b), mi::Error);  // freed
}

TEST(KvCache, FreeReturnsBlocksAndSlots) {
  KvCache cache(small_shape());
  const int a = cache.allocate_sequence();
  cache.append(a, 10);
  const int b = cache.allocate_sequence();
  cache.append(b, 5);
  EXPECT_EQ(cache.free_blocks(), 1u);
  cache.free_sequence(a);
  EXPECT_EQ(cache.free_blocks(), 4u);
  const int c = cache.allocate_sequence();
  EXPECT_EQ(c, a);  // the slot is reused
  cache.append(c, 10);
  cache.clear_sequence(b);
  EXPECT_EQ(cache.length(b), 0);
  EXPECT_EQ(cache.free_blocks(), 3u);
  cache.append(b, 10);
  EXPECT_EQ(cache.free_blocks(), 0u);
}

namespace {
// Blocks of 64 positions: groups of kGroupPositions / 64 = 2 blocks, so a few blocks span several groups.
KvCacheShape grouped_shape(int max_sequences, int max_context, int total_blocks) {
  static_assert(mi::runtime::kGroupPositions == 128, "the block numbers below assume groups of 2 blocks of 64");
  KvCacheShape s = small_shape();  // its layers, heads and head_dim
  s.max_sequences = max_sequences;
  s.max_context = max_context;
  s.block_size = 64;
  s.total_blocks = total_blocks;
  return s;
}

// Writes a distinct tag to every element of every row of each sequence, then reads them all back: no two rows of
// the pool overlap, and every row lies inside the cache's bytes.
void expect_rows_distinct(KvCache& cache, const std::vector<int>& seqs) {
  const auto& sh = cache.shape();
  const auto tag = [](int seq, int layer, int kind, int head, int pos, int d) {
    return float((((seq * 4 + layer) * 2 + kind) * 4 + head) * 10000 + pos * 4 + d);  // exact in f32 below 2^24
  };
  const float* base = cache.key(seqs[0], 0, 0, 0);
  for (int seq : seqs)
    for (int l = 0; l < sh.layers; ++l)
      for (int h = 0; h < sh.kv_heads; ++h)
        for (int p = 0; p < cache.length(seq); ++p)
          base = std::min<const float*>({base, cache.key(seq, l, h, p), cache.value(seq, l, h, p)});
  for (int seq : seqs)
    for (int l = 0; l < sh.layers; ++l)
      for (int h = 0; h < sh.kv_heads; ++h)
        for (int p = 0; p < cache.length(seq); ++p)
          for (int kind = 0; kind < 2; ++kind) {
            float* row = kind == 0 ? cache.key(seq, l, h, p) : cache.value(seq, l, h, p);
            ASSERT_LE(std::size_t(row - base + sh.head_dim) * sizeof(float), cache.bytes());
            for (int d = 0; d < sh.head_dim; ++d) row[d] = tag(seq, l, kind, h, p, d);
          }
  for (int seq : seqs)
    for (int l = 0; l < sh.layers; ++l)
      for (int h = 0; h < sh.kv_heads; ++h)
        for (int p = 0; p < cache.length(seq); ++p)
          for (int d = 0; d < sh.head_dim; ++d) {
            ASSERT_EQ(cache.key(seq, l, h, p)[d], tag(seq, l, 0, h, p, d)) << "seq " << seq << " pos " << p;
            ASSERT_EQ(cache.value(seq, l, h, p)[d], tag(seq, l, 1, h, p, d)) << "seq " << seq << " pos " << p;
          }
}
}  // namespace

// The layout's point: a sequence's consecutive blocks of one group hold each head's rows as one run (the last row
// of block 0 is followed by the first of block 1), and each new sequence starts a group of its own while one is
// free, so its blocks stay consecutive. A group boundary ends the run.
TEST(KvCache, ASequencesBlocksInOneGroupAreOneRunPerHead) {
  KvCache cache(grouped_shape(3, 256, 0));  // 3 x 4 blocks = 6 groups of 2
  EXPECT_EQ(cache.group_positions(), 128);
  const int a = cache.allocate_sequence(), b = cache.allocate_sequence();
  cache.append(a, 10);   // block 0 (group 0)
  cache.append(b, 10);   // not block 1, the free list's top: the first block of the next wholly free group, 2
  cache.append(a, 100);  // block 1, the one after a's last
  cache.append(a, 100);  // a's third block: 2 is b's, so the first block of the next free group (4), then 5
  EXPECT_EQ(std::vector<int>(cache.block_table(a).begin(), cache.block_table(a).end()), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(std::vector<int>(cache.block_table(b).begin(), cache.block_table(b).end()), (std::vector<int>{2}));
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h) {
      EXPECT_EQ(cache.key(a, l, h, 64) - cache.key(a, l, h, 63), 4);  // across a block boundary: one run
      EXPECT_EQ(cache.value(a, l, h, 64) - cache.value(a, l, h, 63), 4);
      EXPECT_NE(cache.key(a, l, h, 128) - cache.key(a, l, h, 127), 4);  // across groups: not
    }
  cache.append(b, 100);  // block 3: the one after b's last, in the same group
  EXPECT_EQ(cache.block_table(b)[1], 3);
  expect_rows_distinct(cache, {a, b});
}

// When no group is wholly free the cache takes any free block (fragmented or nearly full pools still fill up), and a
// pool whose block count is not a multiple of the group size has a shorter last group whose rows stay inside it.
TEST(KvCache, AFragmentedPoolStillHandsOutEveryBlock) {
  KvCache cache(grouped_shape(4, 128, 7));  // groups {0,1} {2,3} {4,5} {6}
  std::vector<int> seqs;
  for (int i = 0; i < 4; ++i) {
    seqs.push_back(cache.allocate_sequence());
    cache.append(seqs.back(), 1);
  }
  std::vector<int> first;
  for (int s : seqs) first.push_back(cache.block_table(s)[0]);
  EXPECT_EQ(first, (std::vector<int>{0, 2, 4, 6}));  // one group each while one is free
  for (int i = 0; i < 3; ++i) cache.append(seqs[std::size_t(i)], 64);  // each takes the block after its first
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.block_table(seqs[std::size_t(i)])[1], first[std::size_t(i)] + 1);
  EXPECT_EQ(cache.free_blocks(), 0u);
  EXPECT_THROW(cache.append(seqs[3], 64), mi::Error);
  expect_rows_distinct(cache, seqs);
  cache.free_sequence(seqs[1]);  // frees group {2,3}
  cache.free_sequence(seqs[0]);  // and {0,1}
  cache.append(seqs[3], 64);     // 6 is the last group's only block: the lowest free group's first block, 0
  EXPECT_EQ(cache.block_table(seqs[3])[1], 0);
  const int c = cache.allocate_sequence();
  cache.append(c, 128);  // group {2,3} is wholly free
  EXPECT_EQ(std::vector<int>(cache.block_table(c).begin(), cache.block_table(c).end()), (std::vector<int>{2, 3}));
  const int d = cache.allocate_sequence();
  cache.append(d, 1);  // no group is wholly free now ({0,1} holds 0): the remaining free block, 1
  EXPECT_EQ(cache.block_table(d)[0], 1);
  EXPECT_EQ(cache.free_blocks(), 0u);
  expect_rows_distinct(cache, {seqs[2], seqs[3], c, d});
}

// A sequence whose group is full starts the lowest wholly free group, even where the block after its last one (the
// first of the next group) is free: runs end at a group's edge either way, and the lowest free group is the one most
// likely resident already (here group 0, written by a).
TEST(KvCache, ASequenceLeavingAFullGroupStartsTheLowestFreeGroup) {
  KvCache cache(grouped_shape(2, 256, 8));  // groups {0,1} {2,3} {4,5} {6,7}
  const int a = cache.allocate_sequence(), b = cache.allocate_sequence();
  cache.append(a, 1);    // 0
  cache.append(b, 128);  // 2, 3
  cache.free_sequence(a);  // group {0,1} wholly free again
  cache.append(b, 64);   // block 4 follows b's last and is free, but lies in the next group: the lowest free group's 0
  EXPECT_EQ(std::vector<int>(cache.block_table(b).begin(), cache.block_table(b).end()), (std::vector<int>{2, 3, 0}));
  expect_rows_distinct(cache, {b});
}
