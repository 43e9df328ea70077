// The attention key/value cache: one f32 allocation made at construction, sized for
// max_sequences x max_context tokens x layers x kv_heads x head_dim (keys and values), never grown.
//
// Memory is organised in blocks of `block_size` token positions (paged-attention style). A block holds, for every
// layer, the keys and the values of its block_size positions:
//
//   block [layers][2 (0 = key, 1 = value)][kv_heads][block_size][head_dim]   f32
//
// so one head's keys of one block are contiguous rows of head_dim floats (what attention reads). Each sequence
// has a block table (logical block i -> physical block), so a later scheduler can hand blocks out on demand;
// the pool holds max_sequences * ceil(max_context / block_size) blocks, so every sequence can always reach
// max_context. All bookkeeping storage is reserved at construction: allocate/append/free (and the prefix cache's
// attach/publish) never allocate.
//
// Usage in one forward step over T new tokens of sequence s:
//   int start = cache.append(s, T);           // reserves positions [start, start+T); throws when full
//   per layer: cache.key(s, layer, h, p) / value(...) rows for p in [start, start+T) are written,
//              then attention reads positions [0, start+T) block by block.
// Errors (unknown sequence, no free slot, context or pool exhausted, position out of range) throw mi::Error.
//
// Prefix cache (KvCacheShape::prefix_cache; off = every block belongs to exactly one sequence, as before).
// Blocks are reference counted. A full block of prompt positions can be published: it is then registered under
// the exact key (parent block, its block_size token ids), where the parent is the registered block before it in
// the same sequence (none for block 0), so a key names the whole token prefix up to the block's end. A new,
// empty sequence can attach the longest registered chain matching its prompt: those blocks are shared into its
// block table (refcount + 1) and their positions need not be computed again.
//   int seq = cache.allocate_sequence();
//   int cached = cache.attach_prefix(seq, prompt);      // a multiple of block_size, < prompt.size()
//   ... compute prompt positions [cached, prompt.size()) (append + write as above) ...
//   cache.publish_prefix(seq, prompt);                  // after those positions are written
// Lookup is exact: a 64-bit hash of the key only picks candidates (an intrusive bucket chain), and parent and
// token ids are compared before a block is matched. Shared blocks are never written: attached lengths are block
// multiples, so appended positions start in a fresh block (append checks that the block it would write into is
// private and unregistered).
// Freeing: a block whose refcount drops to 0 goes back to the free list when unregistered; when registered it
// stays cached on an LRU list of evictable blocks (still matchable). Allocation takes the free list first, then
// evicts the least recently used cached block (unregistering it). free_blocks() counts both kinds.
// Chains and eviction: lookup walks from block 0 and stops at the first missing block, so a cached block whose
// parent was evicted can no longer be matched (and is evicted by LRU in due course). Keys name the parent by
// physical id and its registration serial, so a parent's physical block being reused and registered again
// under another prefix never revives an orphan. In practice orphans do not arise: a sequence's blocks are
// released last block first, and every holder of a cached block also holds its ancestors, so children always
// sit before their parents in the LRU order and are evicted first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace mi::runtime {

struct KvCacheShape {
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int max_sequences = 1;  // max_batch: sequences alive at the same time
  int max_context = 0;    // tokens per sequence
  int block_size = 16;    // kv_block_size: token positions per block
  bool prefix_cache = false;  // keep published prompt blocks for reuse by later sequences (see above)
};

// Releases the cache's anonymous mapping (KvCache::storage_).
struct UnmapCache {
  std::size_t bytes = 0;
  void operator()(float* p) const;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  std::size_t total_blocks() const { return total_blocks_; }
  // Blocks allocation can take: unowned blocks plus cached (evictable) ones.
  std::size_t free_blocks() const { return free_list_.size() + evictable_; }
  // Cached blocks no sequence holds (refcount 0, registered): reusable by attach_prefix, evicted on demand.
  std::size_t cached_blocks() const { return evictable_; }
  std::size_t bytes() const { return storage_floats_ * sizeof(float); }

  // A new empty sequence; throws when max_sequences are alive.
  int allocate_sequence();
  // Releases the sequence's blocks (refcount - 1; unregistered blocks at 0 return to the pool, registered ones
  // stay cached); the id may be handed out again.
  void free_sequence(int seq);
  // Drops all positions of the sequence (releasing its blocks as above) but keeps its id.
  void clear_sequence(int seq);

  // Extends the sequence by `tokens` positions, taking blocks from the pool as needed; returns the first new
  // position. Throws, leaving the sequence unchanged, when max_context or the pool would be exceeded.
  int append(int seq, int tokens);
  int length(int seq) const;

  // Prefix cache. With shape().prefix_cache false, attach_prefix only checks seq and returns 0, and
  // publish_prefix does nothing.
  // Shares into `seq` (alive and empty, else mi::Error) the longest chain of cached blocks matching `tokens`,
  // at most floor((tokens.size() - 1) / block_size) blocks (and no more than max_context), so at least the last
  // token is always left to compute. Returns the positions now in seq (a multiple of block_size).
  int attach_prefix(int seq, std::span<const int32_t> tokens);
  // Registers every full block of seq covering tokens[0, floor(min(tokens.size(), length(seq)) / block_size) *
  // block_size) that is not registered yet; call it once those positions are written. tokens must be the ids
  // those positions were computed from (mi::Error when a block seq already shares is registered under other
  // ids). Publishing stops at a block whose key is already registered as another physical block (a sequence
  // that computed a cached prefix itself): its later blocks could never be reached from the cached chain.
  void publish_prefix(int seq, std::span<const int32_t> tokens);
  // Counters for a hit-rate metric: prompt tokens passed to attach_prefix, and positions it attached.
  long long prefix_queried_tokens() const { return prefix_queried_tokens_; }
  long long prefix_hit_tokens() const { return prefix_hit_tokens_; }

  // Diagnostics: the sequence's block table and a physical block's reference count.
  std::span<const int> block_table(int seq) const { return checked(seq).blocks; }
  int block_refs(int physical_block) const;
  // Test hook: the registry's hash is and-ed with `mask` (0 = every key collides; lookups must stay exact).
  void set_hash_mask_for_testing(std::uint64_t mask) { hash_mask_ = mask; }

  // Row of head_dim floats for (layer, kv head, position); position must be < length(seq). Write only the
  // positions append() just returned: positions below an attached prefix live in shared blocks.
  float* key(int seq, int layer, int kv_head, int pos) { return row(seq, layer, 0, kv_head, pos); }
  float* value(int seq, int layer, int kv_head, int pos) { return row(seq, layer, 1, kv_head, pos); }
  const float* key(int seq, int layer, int kv_head, int pos) const { return row(seq, layer, 0, kv_head, pos); }
  const float* value(int seq, int layer, int kv_head, int pos) const { return row(seq, layer, 1, kv_head, pos); }

  // A contiguous run of positions [first, first + tokens) of one head, all inside one block:
  // keys/values are [tokens][head_dim] with row stride head_dim.
  struct HeadSpan {
    const float* keys;
    const float* values;
    int first;
    int tokens;
  };
  // The span of the block holding `pos`, clipped to [pos, end) with end <= length(seq). Attention walks
  // positions [0, n) as: for (p = 0; p < n; p += span.tokens) span = head_span(seq, layer, h, p, n).
  HeadSpan head_span(int seq, int layer, int kv_head, int pos, int end) const;

 private:
  struct Sequence {
    bool alive = false;
    int length = 0;
    std::vector<int> blocks;  // logical block -> physical block; capacity reserved for max_context
  };

  const Sequence& checked(int seq) const;
  float* row(int seq, int layer, int kind, int kv_head, int pos) const;
  float* block_base(int physical_block) const { return storage_.get() + std::size_t(physical_block) * block_floats_; }
  void release_blocks(Sequence& s);
  int take_block();  // free list first, then the LRU cached block; the caller checked free_blocks()

  // Prefix registry.
  std::uint64_t key_hash(int parent, std::span<const int32_t> tokens) const;
  int find_cached(int parent, std::span<const int32_t> tokens) const;  // -1 when not registered
  void register_block(int block, int parent, std::span<const int32_t> tokens);
  void unregister_block(int block);
  void lru_push_back(int block);
  void lru_remove(int block);

  KvCacheShape shape_;
  int blocks_per_sequence_ = 0;
  std::size_t block_floats_ = 0;     // floats per block
  std::size_t head_block_floats_ = 0;  // block_size * head_dim
  std::size_t storage_floats_ = 0;
  // Anonymous memory mapping: the kernel hands out zero pages on first touch, so a never-used block reads as zero,
  // and only the blocks sequences actually fill become resident (a max_context of 4096 no longer costs the whole
  // cache in RSS and start-up time to zero it). A recycled block keeps its old contents; attention reads only
  // positions written for the current sequence. Without MAP_NORESERVE the mapping is charged against the
  // system's commit limit, so under strict overcommit an oversized cache fails here, at construction.
  std::unique_ptr<float[], UnmapCache> storage_;
  std::vector<Sequence> sequences_;
  std::size_t total_blocks_ = 0;
  std::vector<int> free_list_;  // physical blocks not owned by any sequence (used as a stack)
  std::vector<int> refs_;       // per physical block: sequences holding it

  // Per physical block, meaningful while registered (prefix_cache only; all sized at construction).
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
  long long prefix_queried_tokens_ = 0;
  long long prefix_hit_tokens_ = 0;
};

}  // namespace mi::runtime
