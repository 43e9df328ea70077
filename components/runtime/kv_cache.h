// The attention key/value cache: one allocation made at construction, sized for
// max_sequences x max_context tokens x layers x kv_heads x head_dim (keys and values), never grown. Its elements
// are f32 or bf16 (KvDtype, fixed at construction): precise numerics keep f32 keys and values, fast numerics store
// them rounded to bf16 (round-to-nearest-even), half the bytes a decode step's attention reads (ckb/contracts/
// kv_cache.toml states the accuracy; experience OPT-020 the measurement).
//
// Memory is organised in blocks of `block_size` token positions (paged-attention style). A block holds, for every
// layer, the keys and the values of its block_size positions. Physical blocks are stored in groups of G =
// max(1, kGroupPositions / block_size) consecutive blocks (the pool's last group may be shorter), each group laid out
// head-run by head-run:
//
//   group [layers][2 (0 = key, 1 = value)][kv_heads][G blocks][block_size][head_dim]   f32 | bf16
//
// so one head's keys of one block are contiguous rows of head_dim elements (what attention reads), and the same
// head's keys of the group's next block follow them: a sequence whose blocks are consecutive in the pool has its
// keys and values in runs of group_positions() = block_size x G positions per head (128 where block_size divides
// 128) instead of one block's. Why: see kGroupPositions (experience OPT-037). Each sequence has a block table
// (logical block i -> physical block), so the scheduler hands blocks out on demand; the pool holds total_blocks
// blocks: by default max_sequences * ceil(max_context / block_size), so every sequence can always reach max_context;
// fewer (runtime.kv_blocks, at least one whole context) when the scheduler's admission control
// keeps the sequences within the pool. All bookkeeping storage is reserved at construction: allocate/append/free
// never allocate.
//
// Usage in one forward step over T new tokens of sequence s:
//   int start = cache.append(s, T);           // reserves positions [start, start+T); throws when full
//   per layer: cache.key(s, layer, h, p) / value(...) rows for p in [start, start+T) are written,
//              then attention reads positions [0, start+T) in spans of at most one block (head_span).
// Errors (unknown sequence, no free slot, context or pool exhausted, position out of range) throw mi::Error.
//
// Blocks are reference counted: a block returns to the free list when no block table holds it any more. On its
// own the cache gives every block to exactly one sequence. Finding blocks worth sharing and keeping them beyond
// their last sequence is the job of a BlockSharing layer over the cache (runtime/prefix_cache.h, compiled only into
// engines whose constraints ask for the prefix cache): it hands blocks to sequences with adopt_block, and the cache
// asks it, where a block would go back to the free list, whether it keeps the block instead.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "common/bf16.h"

namespace mi::runtime {

// Element type of the cached keys and values.
enum class KvDtype { f32, bf16 };
template <class E>
constexpr KvDtype kv_dtype_of() {
  static_assert(std::is_same_v<E, float> || std::is_same_v<E, bf16_t>, "KV cache elements are float or bf16_t");
  return std::is_same_v<E, float> ? KvDtype::f32 : KvDtype::bf16;
}
const char* kv_dtype_name(KvDtype dtype);

// Positions per head run of a block group (see the layout above). A decode step reads each head's keys and values
// once; with one block per run (G = 1, the layout before) a thread's run of a layer ended after one block (32 KiB for
// its 4 of Qwen3-0.6B's KV heads) and the next began 3.5 MiB further on, too short for the prefetchers' ramp. AMD
// Zen 5, 2 threads, one sequence at 1024 positions: decode attention 6.3-7.0 ms against 7.7-8.4 with G = 1 (9
// alternated rounds); 256 positions per group 3-5 % faster still, for twice the memory granularity. The cost: short
// sequences decoded together read shorter runs than G = 1 gave them (B = 8 at positions 11-75: attention 3.7-5.2 vs
// 2.6-3.6 ms); experience OPT-037.
constexpr int kGroupPositions = 128;

struct KvCacheShape {
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int max_sequences = 1;  // max_batch: sequences alive at the same time
  int max_context = 0;    // tokens per sequence
  int block_size = 16;    // kv_block_size: token positions per block
  int total_blocks = 0;   // blocks in the pool (runtime.kv_blocks); 0 = max_sequences x ceil(max_context / block_size)
  KvDtype dtype = KvDtype::f32;  // element type of keys and values
};

// A layer that shares physical blocks between sequences and keeps them beyond their last sequence
// (runtime/prefix_cache.h). The cache consults the one attached to it (KvCache::attach_sharing); it never owns it.
class BlockSharing {
 public:
  // No block table holds `block` any more. True: the layer keeps it (cached for reuse, reclaimable); false: it
  // returns to the free list.
  virtual bool keep_unreferenced(int block) = 0;
  // Blocks the layer keeps only for reuse, which the cache may take back: free_blocks() counts them.
  virtual std::size_t reclaimable_blocks() const = 0;
  // Gives up one of them, which the cache hands out as a fresh block. Called only when the free list is empty
  // and reclaimable_blocks() > 0.
  virtual int reclaim_block() = 0;
  // Whether the layer needs the block's contents unchanged (other sequences may adopt it): an append never
  // writes into such a block.
  virtual bool frozen(int block) const = 0;

 protected:
  ~BlockSharing() = default;
};

// Releases the cache's anonymous mapping (KvCache::storage_).
struct UnmapCache {
  std::size_t bytes = 0;
  void operator()(std::byte* p) const;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  std::size_t total_blocks() const { return total_blocks_; }
  // Blocks allocation can take: the free list, plus those a BlockSharing layer keeps only for reuse.
  std::size_t free_blocks() const { return free_list_.size() + (sharing_ ? sharing_->reclaimable_blocks() : 0); }
  std::size_t bytes() const { return storage_elements_ * element_bytes_; }
  KvDtype dtype() const { return shape_.dtype; }
  // Positions per block group (block_size x G, see the layout above): a group's memory becomes resident together.
  int group_positions() const { return shape_.block_size * blocks_per_group_; }

  // A new empty sequence; throws when max_sequences are alive.
  int allocate_sequence();
  // Releases the sequence's blocks (reference count - 1, last block first; a block no table holds any more goes
  // back to the free list unless the sharing layer keeps it); the id may be handed out again.
  void free_sequence(int seq);
  // Drops all positions of the sequence (releasing its blocks as above) but keeps its id.
  void clear_sequence(int seq);

  // Extends the sequence by `tokens` positions, taking blocks from the pool as needed; returns the first new
  // position. Throws, leaving the sequence unchanged, when max_context or the pool would be exceeded.
  int append(int seq, int tokens);
  int length(int seq) const;

  // The sequence's block table (logical block -> physical block), and a physical block's reference count (the
  // block tables holding it).
  std::span<const int> block_table(int seq) const { return checked(seq).blocks; }
  int block_refs(int physical_block) const;

  // For a BlockSharing layer: at most one is attached; detach_sharing (before the layer goes away) takes back every
  // block the layer keeps for reuse.
  void attach_sharing(BlockSharing& sharing);
  void detach_sharing(BlockSharing& sharing);
  // Extends `seq`, whose length is a multiple of block_size, by one whole block that another sequence filled and
  // the attached layer keeps frozen (reference count + 1): seq reads its positions and never writes them.
  void adopt_block(int seq, int physical_block);

  // Row of head_dim elements of type E (the cache's dtype: float or bf16_t, else mi::Error) for (layer, kv head,
  // position); position must be < length(seq). Write only the positions append() just returned: positions in
  // adopted blocks belong to shared blocks.
  template <class E = float>
  E* key(int seq, int layer, int kv_head, int pos) { return typed<E>(row(seq, layer, 0, kv_head, pos)); }
  template <class E = float>
  E* value(int seq, int layer, int kv_head, int pos) { return typed<E>(row(seq, layer, 1, kv_head, pos)); }
  template <class E = float>
  const E* key(int seq, int layer, int kv_head, int pos) const { return typed<E>(row(seq, layer, 0, kv_head, pos)); }
  template <class E = float>
  const E* value(int seq, int layer, int kv_head, int pos) const { return typed<E>(row(seq, layer, 1, kv_head, pos)); }

  // A contiguous run of positions [first, first + tokens) of one head, all inside one block:
  // keys/values are [tokens][head_dim] with row stride head_dim.
  template <class E>
  struct HeadSpanOf {
    const E* keys;
    const E* values;
    int first;
    int tokens;
  };
  using HeadSpan = HeadSpanOf<float>;
  // The span of the block holding `pos`, clipped to [pos, end) with end <= length(seq). Attention walks
  // positions [0, n) as: for (p = 0; p < n; p += span.tokens) span = head_span(seq, layer, h, p, n) - a decode
  // step window by window (end = the window's end, a multiple of block_size or n), which gives the same spans.
  template <class E = float>
  HeadSpanOf<E> head_span(int seq, int layer, int kv_head, int pos, int end) const {
    const int tokens = span_tokens(seq, pos, end);
    return {typed<E>(row(seq, layer, 0, kv_head, pos)), typed<E>(row(seq, layer, 1, kv_head, pos)), pos, tokens};
  }

 private:
  struct Sequence {
    bool alive = false;
    int length = 0;
    std::vector<int> blocks;  // logical block -> physical block; capacity reserved for max_context
  };

  const Sequence& checked(int seq) const;
  std::byte* row(int seq, int layer, int kind, int kv_head, int pos) const;
  int span_tokens(int seq, int pos, int end) const;  // checks [pos, end) and clips it to pos's block
  [[noreturn]] void wrong_element_type(KvDtype asked) const;
  template <class E>
  E* typed(std::byte* p) const {
    if (kv_dtype_of<E>() != shape_.dtype) wrong_element_type(kv_dtype_of<E>());
    return reinterpret_cast<E*>(p);
  }
  void release_blocks(Sequence& s);
  int take_block(const Sequence& s);  // the block s appends next; the caller checked free_blocks()
  void push_free(int block);
  void remove_free(int block);  // from anywhere in the free list

  KvCacheShape shape_;
  int blocks_per_sequence_ = 0;
  std::size_t element_bytes_ = 4;        // 4 (f32) or 2 (bf16)
  std::size_t block_elements_ = 0;       // elements per block
  std::size_t head_block_elements_ = 0;  // block_size * head_dim
  int blocks_per_group_ = 1;             // max(1, kGroupPositions / block_size)
  std::size_t storage_elements_ = 0;
  // Anonymous memory mapping: the kernel hands out zero pages on first touch, so a never-used block reads as zero,
  // and only the memory of blocks sequences actually fill becomes resident (with huge pages, whole block groups:
  // kv_cache.cpp, the constructor) (a max_context of 4096 no longer costs the whole
  // cache in RSS and start-up time to zero it). A recycled block keeps its old contents; attention reads only
  // positions written for the current sequence. Without MAP_NORESERVE the mapping is charged against the
  // system's commit limit, so under strict overcommit an oversized cache fails here, at construction.
  std::unique_ptr<std::byte[], UnmapCache> storage_;
  std::vector<Sequence> sequences_;
  std::size_t total_blocks_ = 0;
  std::vector<int> free_list_;   // physical blocks no sequence holds and no sharing layer keeps (top: back())
  std::vector<int> free_slot_;   // per physical block: its index in free_list_, -1 when not free
  std::vector<int> group_free_;  // per block group: its blocks in free_list_
  std::vector<int> refs_;       // per physical block: block tables holding it
  BlockSharing* sharing_ = nullptr;  // runtime/prefix_cache.h in engines that have it
};

}  // namespace mi::runtime
