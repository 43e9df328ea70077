// The prefix cache over a KvCache (ckb/contracts/prefix_cache.toml): reuse of published prompt blocks across
// sequences, reference counts, LRU eviction of cached blocks under pressure, exact matching (also when every key
// hashes alike), the "always leave one token to compute" rule, the engine without it (a plain KvCache and
// NoPrefixCache), and a randomized run against a reference model of block ownership and of what every position must
// hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "common/error.h"
#include "runtime/kv_cache.h"
#include "runtime/prefix_cache.h"
#include "server/no_prefix_cache.h"

namespace {

using mi::runtime::KvCache;
using mi::runtime::KvCacheShape;
using mi::runtime::PrefixCache;
using Tokens = std::vector<int32_t>;

KvCacheShape shape(int max_sequences, int max_context, int block_size) {
  KvCacheShape s;
  s.layers = 2;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.max_sequences = max_sequences;
  s.max_context = max_context;
  s.block_size = block_size;
  return s;
}

// What a model would store at position p of a sequence of `tokens`: a function of tokens[0..p] only (so a block
// computed for one sequence is valid for another exactly when their prefixes agree). Values stay exact in f32.
float prefix_tag(const Tokens& tokens, int p) {
  std::uint32_t h = 17;
  for (int i = 0; i <= p; ++i) h = (h * 31u + std::uint32_t(tokens[std::size_t(i)]) * 7u + 3u) & 0xffffffu;
  return float(h);
}

void write_positions(KvCache& cache, int seq, const Tokens& tokens, int first, int end) {
  const auto& s = cache.shape();
  for (int p = first; p < end; ++p)
    for (int l = 0; l < s.layers; ++l)
      for (int h = 0; h < s.kv_heads; ++h) {
        float* k = cache.key(seq, l, h, p);
        float* v = cache.value(seq, l, h, p);
        k[0] = float(tokens[std::size_t(p)]);
        k[1] = float(p);
        k[2] = prefix_tag(tokens, p);
        k[3] = float(l * 10 + h);
        for (int d = 0; d < s.head_dim; ++d) v[d] = -k[d];
      }
}

// True when every position of seq holds what write_positions would have written for `tokens`.
::testing::AssertionResult holds(const KvCache& cache, int seq, const Tokens& tokens) {
  const auto& s = cache.shape();
  for (int p = 0; p < cache.length(seq); ++p)
    for (int l = 0; l < s.layers; ++l)
      for (int h = 0; h < s.kv_heads; ++h) {
        const float* k = cache.key(seq, l, h, p);
        const float* v = cache.value(seq, l, h, p);
        const float want[4] = {float(tokens[std::size_t(p)]), float(p), prefix_tag(tokens, p), float(l * 10 + h)};
        for (int d = 0; d < 4; ++d)
          if (k[d] != want[d] || v[d] != -want[d])
            return ::testing::AssertionFailure() << "sequence " << seq << " position " << p << " layer " << l
                                                 << " head " << h << " element " << d << ": " << k[d] << " != "
                                                 << want[d];
      }
  return ::testing::AssertionSuccess();
}

// Allocates a sequence for `tokens`, attaches what is cached, computes (writes) the rest, returns the sequence.
// Prefix: PrefixCache, or NoPrefixCache as in engines built without the prefix cache.
template <class Prefix>
int run_prompt(KvCache& cache, Prefix& prefix, const Tokens& tokens, int* cached = nullptr, bool publish = true) {
  const int seq = cache.allocate_sequence();
  const int n = prefix.attach(seq, tokens);
  if (cached) *cached = n;
  const int start = cache.append(seq, int(tokens.size()) - n);
  EXPECT_EQ(start, n);
  write_positions(cache, seq, tokens, start, int(tokens.size()));
  if (publish) prefix.publish(seq, tokens);
  return seq;
}

Tokens iota_tokens(int n, int32_t first = 100) {
  Tokens t(std::size_t(n), 0);
  for (int i = 0; i < n; ++i) t[std::size_t(i)] = first + i;
  return t;
}

std::vector<int> table(const KvCache& cache, int seq) {
  const auto t = cache.block_table(seq);
  return std::vector<int>(t.begin(), t.end());
}

// An engine without the prefix cache: the plain KvCache and the serving loop's NoPrefixCache.
TEST(KvPrefixCache, DisabledModeUnchanged) {
  KvCache cache(shape(2, 8, 4));
  mi::server::NoPrefixCache none(cache);
  const Tokens prompt = iota_tokens(8);
  int cached = -1;
  const int a = run_prompt(cache, none, prompt, &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(table(cache, a), (std::vector<int>{0, 1}));  // block 0 handed out first, as always
  cache.free_sequence(a);
  EXPECT_EQ(cache.free_blocks(), 4u);
  EXPECT_EQ(none.cached_blocks(), 0u);
  const int b = run_prompt(cache, none, prompt, &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(table(cache, b), (std::vector<int>{0, 1}));
  EXPECT_EQ(none.queried_tokens(), 0);
  EXPECT_EQ(none.hit_tokens(), 0);
  EXPECT_FALSE(mi::server::NoPrefixCache::kReusesPrefixes);
}

TEST(KvPrefixCache, ReuseAcrossSequencesReadsBackIdenticalValues) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens prompt = iota_tokens(10);
  const int a = run_prompt(cache, prefix, prompt);
  const std::vector<int> a_blocks = table(cache, a);
  cache.free_sequence(a);
  EXPECT_EQ(prefix.cached_blocks(), 2u);  // the two full prompt blocks; the third (2 positions) is not published
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks());

  const int b = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(b, prompt), 8);
  EXPECT_EQ(cache.length(b), 8);
  EXPECT_EQ(table(cache, b), (std::vector<int>{a_blocks[0], a_blocks[1]}));
  EXPECT_EQ(prefix.cached_blocks(), 0u);
  EXPECT_TRUE(holds(cache, b, prompt));
  EXPECT_EQ(cache.append(b, 2), 8);  // the rest starts in a fresh private block
  EXPECT_EQ(cache.block_refs(table(cache, b)[2]), 1);
  write_positions(cache, b, prompt, 8, 10);
  EXPECT_TRUE(holds(cache, b, prompt));
  EXPECT_EQ(prefix.queried_tokens(), 20);
  EXPECT_EQ(prefix.hit_tokens(), 8);

  // A longer prompt sharing the first 10 tokens also shares the 2 cached blocks.
  Tokens longer = prompt;
  for (int i = 0; i < 5; ++i) longer.push_back(int32_t(500 + i));
  int cached = 0;
  const int c = run_prompt(cache, prefix, longer, &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_TRUE(holds(cache, c, longer));
}

TEST(KvPrefixCache, SharedBlockSurvivesOneOwnerFreeing) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens prompt = iota_tokens(9);
  const int a = run_prompt(cache, prefix, prompt);
  int cached = 0;
  const int b = run_prompt(cache, prefix, prompt, &cached);
  EXPECT_EQ(cached, 8);
  const std::vector<int> shared = table(cache, b);
  EXPECT_EQ(cache.block_refs(shared[0]), 2);
  EXPECT_EQ(cache.block_refs(shared[1]), 2);
  EXPECT_EQ(cache.block_refs(shared[2]), 1);  // b's own last block
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks() - 4);  // 2 shared + one private block each

  cache.free_sequence(a);
  EXPECT_EQ(cache.block_refs(shared[0]), 1);
  EXPECT_EQ(prefix.cached_blocks(), 0u);  // still held by b: not evictable
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks() - 3);
  // Pressure cannot take b's blocks: fill every other block.
  const int c = cache.allocate_sequence();
  cache.append(c, 16);
  EXPECT_TRUE(holds(cache, b, prompt));
  cache.free_sequence(b);
  EXPECT_EQ(cache.block_refs(shared[0]), 0);
  EXPECT_EQ(prefix.cached_blocks(), 2u);
}

TEST(KvPrefixCache, FullyCachedPromptLeavesOneTokenToCompute) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens prompt = iota_tokens(8);  // exactly two blocks
  cache.free_sequence(run_prompt(cache, prefix, prompt));
  EXPECT_EQ(prefix.cached_blocks(), 2u);
  int cached = -1;
  const int b = run_prompt(cache, prefix, prompt, &cached);
  EXPECT_EQ(cached, 4);  // not 8: the last prompt token must still be fed to get its logits
  EXPECT_EQ(cache.length(b), 8);
  EXPECT_TRUE(holds(cache, b, prompt));
  cache.free_sequence(b);
  // One more token and both blocks can be used.
  Tokens nine = prompt;
  nine.push_back(7);
  const int c = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(c, nine), 8);
}

TEST(KvPrefixCache, PromptShorterThanOneBlock) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens short_prompt{5, 6, 7};
  cache.free_sequence(run_prompt(cache, prefix, short_prompt));
  EXPECT_EQ(prefix.cached_blocks(), 0u);  // nothing full to publish
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks());
  int cached = -1;
  cache.free_sequence(run_prompt(cache, prefix, short_prompt, &cached));
  EXPECT_EQ(cached, 0);
  const int s = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(s, Tokens{5}), 0);
  EXPECT_EQ(prefix.attach(s, Tokens{}), 0);
  EXPECT_EQ(cache.length(s), 0);
}

// Block 1 the same, block 2 different: only block 1 is shared. Block 2 the same under a different block 1: nothing.
void check_exact_matching(KvCache& cache, PrefixCache& prefix) {
  const Tokens a{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const Tokens b{1, 2, 3, 4, 5, 6, 7, 0, 9};   // differs in the last token of block 2
  const Tokens c{0, 2, 3, 4, 5, 6, 7, 8, 9};   // differs in block 1 only
  const Tokens d{5, 6, 7, 8, 1, 2, 3, 4, 9};   // a's blocks swapped
  cache.free_sequence(run_prompt(cache, prefix, a));
  int cached = -1;
  int s = run_prompt(cache, prefix, b, &cached);
  EXPECT_EQ(cached, 4);
  EXPECT_TRUE(holds(cache, s, b));
  cache.free_sequence(s);
  for (const Tokens* t : {&c, &d}) {
    s = run_prompt(cache, prefix, *t, &cached);
    EXPECT_EQ(cached, 0);
    EXPECT_TRUE(holds(cache, s, *t));
    cache.free_sequence(s);
  }
  s = run_prompt(cache, prefix, a, &cached);  // a and b both remain reachable
  EXPECT_EQ(cached, 8);
  EXPECT_TRUE(holds(cache, s, a));
  cache.free_sequence(s);
  s = run_prompt(cache, prefix, b, &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_TRUE(holds(cache, s, b));
  cache.free_sequence(s);
}

TEST(KvPrefixCache, MatchingIsExact) {
  KvCache cache(shape(3, 12, 4));  // 9 blocks: nothing is evicted in check_exact_matching
  PrefixCache prefix(cache);
  check_exact_matching(cache, prefix);
}

TEST(KvPrefixCache, MatchingIsExactWhenEveryKeyHashesAlike) {
  KvCache cache(shape(3, 12, 4));
  PrefixCache prefix(cache);
  prefix.set_hash_mask_for_testing(0);  // every key collides: only the parent and token comparison can tell them apart
  check_exact_matching(cache, prefix);
}

TEST(KvPrefixCache, LeastRecentlyUsedCachedBlocksAreEvictedFirst) {
  KvCache cache(shape(2, 8, 4));  // 4 blocks
  PrefixCache prefix(cache);
  const Tokens a{1, 1, 1, 1, 2, 2, 2, 2}, b{3, 3, 3, 3, 4, 4, 4, 4};
  Tokens a9 = a, b9 = b;
  a9.push_back(0);
  b9.push_back(0);
  // Publish a then b (two blocks each), all cached: LRU order a, b.
  int s = run_prompt(cache, prefix, a);
  const std::vector<int> a_blocks = table(cache, s);
  cache.free_sequence(s);
  s = run_prompt(cache, prefix, b);
  const std::vector<int> b_blocks = table(cache, s);
  cache.free_sequence(s);
  EXPECT_EQ(prefix.cached_blocks(), 4u);
  // Using a again makes b the least recently used.
  s = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(s, a9), 8);
  cache.free_sequence(s);
  // Pressure: a fresh sequence needs one block, then another. b's chain goes, its last block first.
  s = cache.allocate_sequence();
  cache.append(s, 4);
  EXPECT_EQ(table(cache, s)[0], b_blocks[1]);
  EXPECT_EQ(prefix.cached_blocks(), 3u);
  int probe = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(probe, b9), 4);  // b's first block is still there
  cache.free_sequence(probe);                    // ...and now most recently used
  cache.append(s, 4);
  EXPECT_EQ(table(cache, s)[1], a_blocks[1]);  // a's chain is now the oldest: its last block goes
  probe = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(probe, a9), 4);
  EXPECT_EQ(table(cache, probe)[0], a_blocks[0]);
  cache.free_sequence(probe);
  EXPECT_EQ(prefix.cached_blocks(), 2u);
  EXPECT_EQ(cache.free_blocks(), 2u);
  cache.free_sequence(s);  // s's blocks were never published: back to the free list
  EXPECT_EQ(cache.free_blocks(), 4u);
  EXPECT_EQ(prefix.cached_blocks(), 2u);
}

// Once the prefix cache holds every block the free list had, a prefill's blocks are all reclaimed ones, offered in
// LRU order: a released chain's last block first. append hands them out ascending, so the new sequence gets the
// evicted chain's consecutive blocks as one run per head again (runtime/kv_cache.h, the block groups), and a free
// block taken before the reclaimed ones keeps its place.
TEST(KvPrefixCache, AReclaimedBurstIsHandedOutInAscendingBlockOrder) {
  KvCache cache(shape(3, 64, 16));  // 12 blocks of 16 positions, groups of 8
  ASSERT_EQ(cache.total_blocks(), 12u);
  ASSERT_EQ(cache.group_positions(), 128);
  PrefixCache prefix(cache);
  const Tokens a = iota_tokens(64, 100), b = iota_tokens(64, 300), c = iota_tokens(64, 500), d = iota_tokens(40, 700);
  int s = run_prompt(cache, prefix, a);
  const std::vector<int> a_blocks = table(cache, s);
  EXPECT_EQ(a_blocks, (std::vector<int>{0, 1, 2, 3}));
  cache.free_sequence(s);
  s = run_prompt(cache, prefix, b);
  const std::vector<int> b_blocks = table(cache, s);
  cache.free_sequence(s);
  const int held = run_prompt(cache, prefix, d, nullptr, /*publish=*/false);  // 3 blocks in use, one left free
  ASSERT_EQ(prefix.cached_blocks(), 8u);
  ASSERT_EQ(cache.free_blocks(), 9u);  // 1 on the free list + 8 cached
  // c needs 4 blocks: the free one, then 3 reclaimed from a's chain (the least recently used), its last block first.
  s = run_prompt(cache, prefix, c, nullptr, /*publish=*/false);
  const std::vector<int> c_blocks = table(cache, s);
  ASSERT_EQ(c_blocks.size(), 4u);
  std::set<int> used(a_blocks.begin(), a_blocks.end());
  used.insert(b_blocks.begin(), b_blocks.end());
  for (int blk : table(cache, held)) used.insert(blk);
  ASSERT_EQ(used.size(), 11u);
  int free_block = 0;
  while (used.count(free_block)) ++free_block;
  EXPECT_EQ(c_blocks[0], free_block);  // the one free block first, as taken
  EXPECT_EQ(std::vector<int>(c_blocks.begin() + 1, c_blocks.end()),
            (std::vector<int>{a_blocks[1], a_blocks[2], a_blocks[3]}));
  EXPECT_TRUE(holds(cache, s, c));
  EXPECT_TRUE(holds(cache, held, d));
  // a's first block is still cached and matchable; b's chain untouched.
  int probe = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(probe, a), 16);
  EXPECT_EQ(table(cache, probe), (std::vector<int>{a_blocks[0]}));
  EXPECT_TRUE(holds(cache, probe, a));
  cache.free_sequence(probe);
  probe = cache.allocate_sequence();
  Tokens b65 = b;
  b65.push_back(1);
  EXPECT_EQ(prefix.attach(probe, b65), 64);
  EXPECT_EQ(table(cache, probe), b_blocks);
  EXPECT_TRUE(holds(cache, probe, b));
}

TEST(KvPrefixCache, AttachNeedsAnEmptySequenceAndPublishChecksTokens) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens prompt = iota_tokens(9);
  const int a = run_prompt(cache, prefix, prompt);
  EXPECT_THROW(prefix.attach(a, prompt), mi::Error);  // not empty
  EXPECT_THROW(prefix.attach(5, prompt), mi::Error);  // no such sequence
  const int b = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(b, prompt), 8);
  Tokens other = prompt;
  other[5] = 0;
  EXPECT_THROW(prefix.publish(b, other), mi::Error);  // b shares blocks cached under `prompt`
  EXPECT_NO_THROW(prefix.publish(b, prompt));
  cache.clear_sequence(b);  // empty again: may attach again
  EXPECT_EQ(prefix.attach(b, prompt), 8);
}

TEST(KvPrefixCache, SamePrefixComputedTwiceIsCachedOnce) {
  KvCache cache(shape(2, 16, 4));
  PrefixCache prefix(cache);
  const Tokens prompt = iota_tokens(12);
  const int a = run_prompt(cache, prefix, prompt, nullptr, /*publish=*/false);
  const int b = run_prompt(cache, prefix, prompt, nullptr, /*publish=*/false);  // nothing cached yet: computed again
  prefix.publish(a, prompt);
  prefix.publish(b, prompt);  // already cached as a's blocks: b's stay private
  cache.free_sequence(b);
  EXPECT_EQ(prefix.cached_blocks(), 0u);
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks() - 3);
  cache.free_sequence(a);
  EXPECT_EQ(prefix.cached_blocks(), 3u);
  Tokens longer = prompt;
  longer.push_back(1);
  const int c = cache.allocate_sequence();
  EXPECT_EQ(prefix.attach(c, longer), 12);
}

// The KV cache outlives the serving loop's prefix cache: when the prefix cache goes, its cached blocks return to the
// free list at once, and published blocks still in sequences (even shared ones) when their last sequence lets go.
TEST(KvPrefixCache, CacheWorksOnAfterThePrefixCacheGoes) {
  KvCache cache(shape(3, 16, 4));
  const Tokens prompt = iota_tokens(9);
  int a = -1, b = -1;
  {
    PrefixCache prefix(cache);
    cache.free_sequence(run_prompt(cache, prefix, iota_tokens(9, 700)));  // two cached blocks
    a = run_prompt(cache, prefix, prompt);
    int cached = 0;
    b = run_prompt(cache, prefix, prompt, &cached);
    EXPECT_EQ(cached, 8);
    EXPECT_EQ(prefix.cached_blocks(), 2u);
    EXPECT_EQ(cache.free_blocks(), cache.total_blocks() - 4);  // 2 shared + one private block each
  }
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks() - 4);  // the cached ones are plain free blocks now
  const int shared = table(cache, b)[0];
  EXPECT_EQ(cache.block_refs(shared), 2);
  cache.free_sequence(a);
  EXPECT_EQ(cache.block_refs(shared), 1);
  EXPECT_TRUE(holds(cache, b, prompt));
  cache.free_sequence(b);
  EXPECT_EQ(cache.free_blocks(), cache.total_blocks());
  // Every block comes back exactly once: the whole pool can be filled again.
  for (int i = 0; i < 3; ++i) cache.append(cache.allocate_sequence(), 16);
  EXPECT_EQ(cache.free_blocks(), 0u);
  EXPECT_THROW(cache.adopt_block(0, 0), mi::Error);  // no sharing layer: nobody would keep the block
}

// Random attach / append / publish / clear / free against a reference model: every block's refcount equals the
// number of block tables holding it, the free count is exactly the blocks nobody holds, and every position of
// every live sequence holds what its own tokens imply (a wrong match would show as a foreign tag).
TEST(KvPrefixCache, RandomOperationsMatchAReferenceModel) {
  for (const int variant : {1, 2, 3, -2}) {  // block size; negative: every key hashes alike
    const int block = variant < 0 ? -variant : variant;
    KvCache cache(shape(3, 12, block));
    PrefixCache prefix(cache);
    if (variant < 0) prefix.set_hash_mask_for_testing(0);
    std::mt19937 rng(1234u + unsigned(variant + 10));
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<Tokens> bases(3);
    for (auto& base : bases)
      for (int i = 0; i < 12; ++i) base.push_back(int32_t(uniform(1, 3)));
    std::map<int, Tokens> live;  // sequence -> token ids of its positions
    long long attached_total = 0;

    auto start = [&](int seq) {
      const Tokens& base = bases[std::size_t(uniform(0, 2))];
      const int prompt_len = uniform(1, 10);
      Tokens prompt(base.begin(), base.begin() + prompt_len);
      if (uniform(0, 3) == 0) prompt[std::size_t(uniform(0, prompt_len - 1))] = int32_t(uniform(1, 3));
      const int cached = prefix.attach(seq, prompt);
      ASSERT_EQ(cached % block, 0);
      ASSERT_LE(cached, prompt_len - 1);
      attached_total += cached;
      ASSERT_EQ(cache.append(seq, prompt_len - cached), cached);
      write_positions(cache, seq, prompt, cached, prompt_len);
      Tokens all = prompt;
      const int generated = uniform(0, 12 - prompt_len);
      for (int g = 0; g < generated; ++g) {
        all.push_back(int32_t(uniform(1, 3)));
        const int p = cache.append(seq, 1);
        write_positions(cache, seq, all, p, p + 1);
      }
      switch (uniform(0, 2)) {
        case 0: break;  // not published
        case 1: prefix.publish(seq, prompt); break;
        case 2: prefix.publish(seq, all); break;  // generated positions are valid cache content too
      }
      live[seq] = all;
    };

    for (int step = 0; step < 3000; ++step) {
      const int op = uniform(0, 2);
      if (op == 0 && int(live.size()) < 3) {
        const int seq = cache.allocate_sequence();
        ASSERT_NO_FATAL_FAILURE(start(seq));
      } else if (!live.empty()) {
        auto it = live.begin();
        std::advance(it, uniform(0, int(live.size()) - 1));
        const int seq = it->first;
        if (op == 1) {
          cache.free_sequence(seq);
          live.erase(it);
        } else {
          cache.clear_sequence(seq);
          ASSERT_NO_FATAL_FAILURE(start(seq));
        }
      }
      std::map<int, int> refs;
      for (const auto& [seq, tokens] : live) {
        ASSERT_EQ(cache.length(seq), int(tokens.size()));
        for (const int b : cache.block_table(seq)) ++refs[b];
        ASSERT_TRUE(holds(cache, seq, tokens)) << "step " << step;
      }
      for (int b = 0; b < int(cache.total_blocks()); ++b) {
        ASSERT_EQ(cache.block_refs(b), refs.count(b) ? refs[b] : 0) << "block " << b << " step " << step;
        if (cache.block_refs(b) > 1) {
          ASSERT_TRUE(prefix.published(b)) << "a shared block is frozen; block " << b;
        }
      }
      ASSERT_EQ(cache.free_blocks(), cache.total_blocks() - refs.size()) << "step " << step;
      ASSERT_LE(prefix.cached_blocks(), cache.free_blocks());
    }
    EXPECT_GT(attached_total, 100) << "the run should reuse cached blocks often";
    EXPECT_EQ(prefix.hit_tokens(), attached_total);
  }
}

}  // namespace
