// The prefix cache: whole KV blocks of prompt prefixes shared across sequences (exact token match, reference counted,
// evicted LRU). Compiled only into engines whose constraints ask for it (runtime.prefix_cache; the serving loop names
// this type through the generated engine_features.h), as the BlockSharing layer over the paged KvCache
// (runtime/kv_cache.h): it owns the registry of published blocks and the LRU list of cached ones; the KV cache counts
// the block tables holding each block.
//
// A full block of prompt positions can be published: it is then registered under the exact key (parent block, its
// block_size token ids), where the parent is the registered block before it in the same sequence (none for block
// 0), so a key names the whole token prefix up to the block's end. A new, empty sequence can attach the longest
// registered chain matching its prompt: those blocks are shared into its block table (reference count + 1) and
// their positions need not be computed again (KvCache::adopt_block).
//   PrefixCache prefix(cache);                     // attaches itself to the cache as its BlockSharing layer
//   int seq = cache.allocate_sequence();
//   int cached = prefix.attach(seq, prompt);        // a multiple of block_size, < prompt.size()
//   ... compute prompt positions [cached, prompt.size()) (cache.append + write) ...
//   prefix.publish(seq, prompt);                   // after those positions are written
// Lookup is exact: a 64-bit hash of the key only picks candidates (an intrusive bucket chain), and parent and
// token ids are compared before a block is matched. Published blocks are frozen, so shared blocks are never
// written: attached lengths are block multiples, so appended positions start in a fresh block (the KV cache's
// append checks that the block it would write into is held by one sequence and not frozen).
// Freeing: a block no sequence holds any more goes back to the KV cache's free list when unpublished; when
// published it stays cached on an LRU list of evictable blocks (still matchable). The cache's allocation takes its
// free list first, then evicts the least recently used cached block (unregistering it). KvCache::free_blocks()
// counts both kinds.
// Chains and eviction: lookup walks from block 0 and stops at the first missing block, so a cached block whose
// parent was evicted can no longer be matched (and is evicted by LRU in due course). Keys name the parent by
// physical id and its registration serial, so a parent's physical block being reused and registered again
// under another prefix never revives an orphan. In practice orphans do not arise: a sequence's blocks are
// released last block first, and every holder of a cached block also holds its ancestors, so children always
// sit before their parents in the LRU order and are evicted first.
// All storage is sized at construction: attach, publish and eviction never allocate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/kv_cache.h"

namespace mi::runtime {

class PrefixCache final : private BlockSharing {
 public:
  // The engine reuses prompt prefixes (what the server's ready line reports; NoPrefixCache says false).
  static constexpr bool kReusesPrefixes = true;

  // Becomes `cache`'s block-sharing layer; the cache must outlive it. When it goes, its cached blocks return to the
  // cache's free list, and published blocks still in sequences return there when their last sequence lets go.
  explicit PrefixCache(KvCache& cache);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Shares into `seq` (alive and empty, else mi::Error) the longest chain of cached blocks matching `tokens`,
  // at most floor((tokens.size() - 1) / block_size) blocks (and no more than max_context), so at least the last
  // token is always left to compute. Returns the positions now in seq (a multiple of block_size).
  int attach(int seq, std::span<const int32_t> tokens);
  // Registers every full block of seq covering tokens[0, floor(min(tokens.size(), length(seq)) / block_size) *
  // block_size) that is not registered yet; call it once those positions are written. tokens must be the ids
  // those positions were computed from (mi::Error when a block seq already shares is registered under other
  // ids). Publishing stops at a block whose key is already registered as another physical block (a sequence
  // that computed a cached prefix itself): its later blocks could never be reached from the cached chain.
  void publish(int seq, std::span<const int32_t> tokens);

  // Cached blocks no sequence holds (registered, reference count 0): reusable by attach, evicted on demand.
  std::size_t cached_blocks() const { return evictable_; }
  // Counters for a hit-rate metric: prompt tokens passed to attach, and positions it attached.
  long long queried_tokens() const { return queried_tokens_; }
  long long hit_tokens() const { return hit_tokens_; }

  // Diagnostics: whether a physical block is published (registered, frozen).
  bool published(int physical_block) const { return registered_.at(std::size_t(physical_block)) != 0; }
  // Test hook: the registry's hash is and-ed with `mask` (0 = every key collides; lookups must stay exact).
  void set_hash_mask_for_testing(std::uint64_t mask) { hash_mask_ = mask; }

 private:
  // BlockSharing: what the KV cache asks where a block would go back to its free list or be written.
  bool keep_unreferenced(int block) override;
  std::size_t reclaimable_blocks() const override { return evictable_; }
  int reclaim_block() override;
  bool frozen(int block) const override { return registered_[std::size_t(block)] != 0; }

  std::uint64_t key_hash(int parent, std::span<const int32_t> tokens) const;
  int find_cached(int parent, std::span<const int32_t> tokens) const;  // -1 when not registered
  void register_block(int block, int parent, std::span<const int32_t> tokens);
  void unregister_block(int block);
  void lru_push_back(int block);
  void lru_remove(int block);

  KvCache& cache_;
  const std::size_t block_size_;
  const std::size_t total_blocks_;
  // Per physical block, meaningful while registered.
  std::vector<std::uint8_t> registered_;
  std::vector<std::uint64_t> serial_;         // registration serial (unique over the cache's lifetime)
  std::vector<int> parent_;                   // parent block, -1 for a first block
  std::vector<std::uint64_t> parent_serial_;  // the parent's serial when this block was registered (0 for none)
  std::vector<std::uint64_t> hash_;
  std::vector<int32_t> block_tokens_;         // [block][block_size] token ids of the key
  std::vector<int> bucket_next_;              // intrusive hash chain
  std::vector<int> buckets_;                  // power of two >= total blocks; head block or -1
  std::vector<int> lru_prev_, lru_next_;      // evictable list; index total_blocks_ is the sentinel
  std::size_t evictable_ = 0;
  std::uint64_t next_serial_ = 1;
  std::uint64_t hash_mask_ = ~std::uint64_t(0);
  long long queried_tokens_ = 0;
  long long hit_tokens_ = 0;
};

}  // namespace mi::runtime
