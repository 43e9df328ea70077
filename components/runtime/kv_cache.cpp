#include "runtime/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace mi::runtime {

void UnmapCache::operator()(std::byte* p) const {
  if (p) munmap(p, bytes);
}

const char* kv_dtype_name(KvDtype dtype) { return dtype == KvDtype::f32 ? "f32" : "bf16"; }

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  auto require_positive = [](int v, const char* field) {
    if (v <= 0) fail("KvCache: field '", field, "': expected a positive integer, got ", v);
  };
  require_positive(shape.layers, "layers");
  require_positive(shape.kv_heads, "kv_heads");
  require_positive(shape.head_dim, "head_dim");
  require_positive(shape.max_sequences, "max_sequences");
  require_positive(shape.max_context, "max_context");
  require_positive(shape.block_size, "block_size");
  if (shape.dtype != KvDtype::f32 && shape.dtype != KvDtype::bf16)
    fail("KvCache: field 'dtype': expected f32 or bf16, got enum value ", int(shape.dtype));
  element_bytes_ = shape.dtype == KvDtype::f32 ? sizeof(float) : sizeof(bf16_t);

  blocks_per_sequence_ = (shape.max_context + shape.block_size - 1) / shape.block_size;
  head_block_elements_ = std::size_t(shape.block_size) * std::size_t(shape.head_dim);
  blocks_per_group_ = std::max(1, kGroupPositions / shape.block_size);
  block_elements_ = std::size_t(shape.layers) * 2 * std::size_t(shape.kv_heads) * head_block_elements_;
  const std::size_t worst_case = std::size_t(shape.max_sequences) * std::size_t(blocks_per_sequence_);
  if (shape.total_blocks < 0)
    fail("KvCache: field 'total_blocks' (runtime.kv_blocks): expected >= 0 (0 = max_sequences x max_context), got ",
         shape.total_blocks);
  if (shape.total_blocks > 0 && shape.total_blocks < blocks_per_sequence_)
    fail("KvCache: field 'total_blocks' (runtime.kv_blocks): ", shape.total_blocks, " blocks of ", shape.block_size,
         " tokens cannot hold one sequence of max_context ", shape.max_context, " tokens; expected at least ",
         blocks_per_sequence_);
  total_blocks_ = shape.total_blocks > 0 ? std::size_t(shape.total_blocks) : worst_case;
  if (total_blocks_ > std::size_t(std::numeric_limits<int>::max()) ||
      block_elements_ > std::numeric_limits<std::size_t>::max() / element_bytes_ / total_blocks_)
    fail("KvCache: shape too large (", shape.max_sequences, " sequences x ", shape.max_context, " tokens x ",
         shape.layers, " layers x ", shape.kv_heads, " kv heads x ", shape.head_dim, " head_dim)");
  storage_elements_ = block_elements_ * total_blocks_;
  const std::size_t bytes = std::max<std::size_t>(storage_elements_ * element_bytes_, 1);
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED)
    fail("KvCache: could not reserve ", bytes, " bytes for the cache (", std::strerror(errno), ")");
  // Transparent huge pages where the kernel offers them (advice: no error if not). Attention runs between layers
  // whose weight streams evict the TLB, and a KV block's runs then start with page walks: with 4 KiB pages each 8 KiB
  // head span costs two. Measured on AMD Zen 4 (2 threads, Qwen3-0.6B KV shape, 32 MB read between layers as the
  // linears do, medians): one sequence at 256 positions 3.9-4.0 -> 3.2-3.5 ms per step, 8 sequences at 128
  // positions 12.5-13.6 -> 10.5-10.9 ms (experience OPT-019; measured with one block per group). Memory still
  // becomes resident only where it is first written, but in whole 2 MiB extents: every huge page of a block group
  // holds rows of each of its blocks, so writing one block makes the whole group resident (28 MiB of f32 for
  // Qwen3-0.6B's shape at 128 positions per group); with 4 KiB pages residency follows the blocks written.
#ifdef MADV_HUGEPAGE
  madvise(mapped, bytes, MADV_HUGEPAGE);
#endif
  storage_ = std::unique_ptr<std::byte[], UnmapCache>(static_cast<std::byte*>(mapped), UnmapCache{bytes});

  sequences_.resize(std::size_t(shape.max_sequences));
  for (auto& s : sequences_) s.blocks.reserve(std::size_t(blocks_per_sequence_));
  free_list_.reserve(total_blocks_);
  free_slot_.assign(total_blocks_, -1);
  group_free_.assign((total_blocks_ + std::size_t(blocks_per_group_) - 1) / std::size_t(blocks_per_group_), 0);
  // Stack order: block 0 is handed out first.
  for (int b = int(total_blocks_) - 1; b >= 0; --b) push_free(b);
  refs_.assign(total_blocks_, 0);
}

const KvCache::Sequence& KvCache::checked(int seq) const {
  if (seq < 0 || seq >= int(sequences_.size()) || !sequences_[std::size_t(seq)].alive)
    fail("KvCache: sequence ", seq, " is not allocated");
  return sequences_[std::size_t(seq)];
}

int KvCache::allocate_sequence() {
  for (std::size_t i = 0; i < sequences_.size(); ++i) {
    if (!sequences_[i].alive) {
      sequences_[i].alive = true;
      sequences_[i].length = 0;
      return int(i);
    }
  }
  fail("KvCache: all ", shape_.max_sequences, " sequence slots are in use (max_sequences)");
}

int KvCache::block_refs(int physical_block) const {
  if (physical_block < 0 || std::size_t(physical_block) >= total_blocks_)
    fail("KvCache: physical block ", physical_block, " out of range (", total_blocks_, " blocks)");
  return refs_[std::size_t(physical_block)];
}

// Last block first: the sharing layer is offered a chain's blocks from its end (runtime/prefix_cache.h: children are
// evicted before their parents), and where take_block falls back to the free list's top it gets the sequence's
// first block again.
void KvCache::release_blocks(Sequence& s) {
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
    const int b = *it;
    if (--refs_[std::size_t(b)] > 0) continue;
    if (!sharing_ || !sharing_->keep_unreferenced(b)) push_free(b);
  }
  s.blocks.clear();  // keeps capacity
  s.length = 0;
}

void KvCache::push_free(int b) {
  free_slot_[std::size_t(b)] = int(free_list_.size());
  free_list_.push_back(b);
  ++group_free_[std::size_t(b / blocks_per_group_)];
}

void KvCache::remove_free(int b) {
  const int slot = free_slot_[std::size_t(b)];
  const int moved = free_list_.back();  // the stack's top takes the removed block's slot
  free_list_[std::size_t(slot)] = moved;
  free_slot_[std::size_t(moved)] = slot;
  free_list_.pop_back();
  free_slot_[std::size_t(b)] = -1;
  --group_free_[std::size_t(b / blocks_per_group_)];
}

// Keeps each sequence's blocks consecutive within a group where it can (the head runs of the layout): the block
// after the sequence's last one when that is free and in the same group; else the first block of the lowest group
// whose blocks are all on the free list; else the free list's top (the pool is fragmented or nearly full); else one
// the sharing layer gives up. Any block is correct - this only decides how long the runs attention reads are.
// Blocks the sharing layer keeps are not on the free list, so a group holding one is never wholly free: a serving
// pool whose free list the prefix cache has emptied hands out reclaimed blocks in its LRU order (append sorts each
// call's burst of them, so a prefill step or chunk gets back the runs of the chains it evicts, as long as those were;
// a decode step's one block at a time stays a single-block run; not measured, experience OPT-037).
int KvCache::take_block(const Sequence& s) {
  int b = -1;
  if (!s.blocks.empty()) {
    const int next = s.blocks.back() + 1;
    if (std::size_t(next) < total_blocks_ && next % blocks_per_group_ != 0 && free_slot_[std::size_t(next)] >= 0)
      b = next;
  }
  for (std::size_t g = 0; b < 0 && g < group_free_.size(); ++g) {
    const std::size_t first = g * std::size_t(blocks_per_group_);
    if (std::size_t(group_free_[g]) == std::min(std::size_t(blocks_per_group_), total_blocks_ - first)) b = int(first);
  }
  if (b < 0 && !free_list_.empty()) b = free_list_.back();
  if (b >= 0) remove_free(b);
  else b = sharing_->reclaim_block();
  refs_[std::size_t(b)] = 1;
  return b;
}

void KvCache::free_sequence(int seq) {
  checked(seq);
  Sequence& s = sequences_[std::size_t(seq)];
  release_blocks(s);
  s.alive = false;
}

void KvCache::clear_sequence(int seq) {
  checked(seq);
  release_blocks(sequences_[std::size_t(seq)]);
}

int KvCache::append(int seq, int tokens) {
  checked(seq);
  Sequence& s = sequences_[std::size_t(seq)];
  if (tokens < 0) fail("KvCache: append of ", tokens, " tokens to sequence ", seq, ": expected >= 0");
  if (tokens > shape_.max_context - s.length)
    fail("KvCache: sequence ", seq, " holds ", s.length, " tokens; appending ", tokens, " exceeds max_context ",
         shape_.max_context);
  const int new_length = s.length + tokens;
  const std::size_t blocks_needed = std::size_t((new_length + shape_.block_size - 1) / shape_.block_size);
  if (blocks_needed > s.blocks.size() && blocks_needed - s.blocks.size() > free_blocks())
    fail("KvCache: no free blocks for sequence ", seq, " (needs ", blocks_needed - s.blocks.size(), ", ",
         free_blocks(), " free)");
  // New positions go into the partly filled last block (if any): it must be this sequence's alone and not frozen.
  // Shared and frozen blocks are always full (the sharing layer deals in whole blocks), so this never fires.
  if (tokens > 0 && s.length % shape_.block_size != 0) {
    const int last = s.blocks.back();
    if (refs_[std::size_t(last)] != 1 || (sharing_ && sharing_->frozen(last)))
      fail("KvCache: internal error: sequence ", seq, " would write into shared or cached block ", last);
  }
  // Blocks the sharing layer gives up come in its LRU order, and a released sequence's chain is offered to it last
  // block first (release_blocks), so a burst of them (a prefill once the prefix cache holds every free block) would
  // walk its chain backwards: sorted ascending they are that chain's runs again, within this call (a chunked prefill
  // sorts each chunk's blocks on their own) (take_block: once the free list is empty every further block of this
  // append is reclaimed; none of them has been written yet).
  std::size_t first_reclaimed = blocks_needed;
  while (s.blocks.size() < blocks_needed) {
    if (free_list_.empty() && first_reclaimed == blocks_needed) first_reclaimed = s.blocks.size();
    s.blocks.push_back(take_block(s));
  }
  if (blocks_needed - first_reclaimed > 1)
    std::sort(s.blocks.begin() + std::ptrdiff_t(first_reclaimed), s.blocks.end());
  const int start = s.length;
  s.length = new_length;
  return start;
}

int KvCache::length(int seq) const { return checked(seq).length; }

// ---- block sharing -----------------------------------------------------------------------------------------

void KvCache::attach_sharing(BlockSharing& sharing) {
  if (sharing_) fail("KvCache: a block-sharing layer is attached already");
  sharing_ = &sharing;
}

void KvCache::detach_sharing(BlockSharing& sharing) {
  if (sharing_ != &sharing) fail("KvCache: detach_sharing of a layer that is not attached");
  // Blocks still in tables return to the free list when their last sequence lets go, as any block does.
  while (sharing.reclaimable_blocks() > 0) push_free(sharing.reclaim_block());
  sharing_ = nullptr;
}

void KvCache::adopt_block(int seq, int physical_block) {
  checked(seq);
  Sequence& s = sequences_[std::size_t(seq)];
  if (!sharing_) fail("KvCache: adopt_block without a block-sharing layer (nobody would hold the block)");
  if (physical_block < 0 || std::size_t(physical_block) >= total_blocks_)
    fail("KvCache: physical block ", physical_block, " out of range (", total_blocks_, " blocks)");
  if (s.length % shape_.block_size != 0 || s.length + shape_.block_size > shape_.max_context)
    fail("KvCache: adopt_block into sequence ", seq, " of length ", s.length, ": expected a block multiple with room ",
         "for a whole block below max_context ", shape_.max_context);
  if (!sharing_->frozen(physical_block))
    fail("KvCache: adopt_block of block ", physical_block, ", which the sharing layer does not keep frozen");
  ++refs_[std::size_t(physical_block)];
  s.blocks.push_back(physical_block);
  s.length += shape_.block_size;
}

std::byte* KvCache::row(int seq, int layer, int kind, int kv_head, int pos) const {
  const Sequence& s = checked(seq);
  if (layer < 0 || layer >= shape_.layers || kv_head < 0 || kv_head >= shape_.kv_heads || pos < 0 ||
      pos >= s.length)
    fail("KvCache: row (layer ", layer, ", kv head ", kv_head, ", position ", pos, ") out of range for sequence ",
         seq, " (layers ", shape_.layers, ", kv heads ", shape_.kv_heads, ", length ", s.length, ")");
  const std::size_t block = std::size_t(s.blocks[std::size_t(pos / shape_.block_size)]);
  const std::size_t offset = std::size_t(pos % shape_.block_size);
  const std::size_t run = (std::size_t(layer) * 2 + std::size_t(kind)) * std::size_t(shape_.kv_heads) +
                          std::size_t(kv_head);
  // The block's group: blocks [first, first + size), the pool's last group possibly shorter.
  const std::size_t group_blocks = std::size_t(blocks_per_group_);
  const std::size_t first = block / group_blocks * group_blocks;
  const std::size_t size = std::min(group_blocks, total_blocks_ - first);
  const std::size_t head_block = run * size + (block - first);  // in head-block units from the group's start
  return storage_.get() + (first * block_elements_ + head_block * head_block_elements_ +
                           offset * std::size_t(shape_.head_dim)) * element_bytes_;
}

void KvCache::wrong_element_type(KvDtype asked) const {
  fail("KvCache: rows are ", kv_dtype_name(shape_.dtype), ", read as ", kv_dtype_name(asked));
}

int KvCache::span_tokens(int seq, int pos, int end) const {
  const Sequence& s = checked(seq);
  if (end > s.length || pos >= end)
    fail("KvCache: span [", pos, ", ", end, ") out of range for sequence ", seq, " of length ", s.length);
  const int block_end = (pos / shape_.block_size + 1) * shape_.block_size;
  return std::min(block_end, end) - pos;
}

}  // namespace mi::runtime
