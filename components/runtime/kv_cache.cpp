#include "runtime/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace mi::runtime {

void UnmapCache::operator()(float* p) const {
  if (p) munmap(p, bytes);
}

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

  blocks_per_sequence_ = (shape.max_context + shape.block_size - 1) / shape.block_size;
  head_block_floats_ = std::size_t(shape.block_size) * std::size_t(shape.head_dim);
  block_floats_ = std::size_t(shape.layers) * 2 * std::size_t(shape.kv_heads) * head_block_floats_;
  total_blocks_ = std::size_t(shape.max_sequences) * std::size_t(blocks_per_sequence_);
  if (total_blocks_ > std::size_t(std::numeric_limits<int>::max()) ||
      block_floats_ > std::numeric_limits<std::size_t>::max() / sizeof(float) / total_blocks_)
    fail("KvCache: shape too large (", shape.max_sequences, " sequences x ", shape.max_context, " tokens x ",
         shape.layers, " layers x ", shape.kv_heads, " kv heads x ", shape.head_dim, " head_dim)");
  storage_floats_ = block_floats_ * total_blocks_;
  const std::size_t bytes = std::max<std::size_t>(storage_floats_ * sizeof(float), 1);
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED)
    fail("KvCache: could not reserve ", bytes, " bytes for the cache (", std::strerror(errno), ")");
  storage_ = std::unique_ptr<float[], UnmapCache>(static_cast<float*>(mapped), UnmapCache{bytes});

  sequences_.resize(std::size_t(shape.max_sequences));
  for (auto& s : sequences_) s.blocks.reserve(std::size_t(blocks_per_sequence_));
  free_list_.reserve(total_blocks_);
  // Stack order: block 0 is handed out first.
  for (int b = int(total_blocks_) - 1; b >= 0; --b) free_list_.push_back(b);
  refs_.assign(total_blocks_, 0);

  if (shape.prefix_cache) {
    const std::size_t n = total_blocks_;
    registered_.assign(n, 0);
    serial_.assign(n, 0);
    parent_.assign(n, -1);
    parent_serial_.assign(n, 0);
    hash_.assign(n, 0);
    block_tokens_.assign(n * std::size_t(shape.block_size), 0);
    bucket_next_.assign(n, -1);
    std::size_t buckets = 1;
    while (buckets < n) buckets *= 2;
    buckets_.assign(buckets, -1);
    lru_prev_.assign(n + 1, int(n));  // empty circular list around the sentinel n
    lru_next_.assign(n + 1, int(n));
  }
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

// Last block first: the free list (a stack) hands the sequence's first block out first again, and cached blocks
// enter the LRU list children before parents, so eviction takes a chain from its end.
void KvCache::release_blocks(Sequence& s) {
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
    const int b = *it;
    if (--refs_[std::size_t(b)] > 0) continue;
    if (!registered_.empty() && registered_[std::size_t(b)])
      lru_push_back(b);
    else
      free_list_.push_back(b);
  }
  s.blocks.clear();  // keeps capacity
  s.length = 0;
}

int KvCache::take_block() {
  int b;
  if (!free_list_.empty()) {
    b = free_list_.back();
    free_list_.pop_back();
  } else {
    b = lru_next_[total_blocks_];  // least recently used cached block
    lru_remove(b);
    unregister_block(b);
  }
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
  // New positions go into the partly filled last block (if any): it must be this sequence's alone. Shared and
  // registered blocks are always full (attach and publish deal in whole blocks), so this never fires.
  if (tokens > 0 && s.length % shape_.block_size != 0) {
    const int last = s.blocks.back();
    if (refs_[std::size_t(last)] != 1 || (!registered_.empty() && registered_[std::size_t(last)]))
      fail("KvCache: internal error: sequence ", seq, " would write into shared or cached block ", last);
  }
  while (s.blocks.size() < blocks_needed) s.blocks.push_back(take_block());
  const int start = s.length;
  s.length = new_length;
  return start;
}

int KvCache::length(int seq) const { return checked(seq).length; }

// ---- prefix cache -------------------------------------------------------------------------------------------

namespace {
std::uint64_t mix64(std::uint64_t x) {  // a strong 64-bit finaliser (splitmix64's)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::uint64_t KvCache::key_hash(int parent, std::span<const int32_t> tokens) const {
  const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
  std::uint64_t h = mix64(std::uint64_t(std::int64_t(parent)) ^ (parent_serial << 32) ^ (parent_serial >> 32));
  for (const int32_t t : tokens) h = mix64(h ^ std::uint64_t(std::uint32_t(t)));
  return h & hash_mask_;
}

int KvCache::find_cached(int parent, std::span<const int32_t> tokens) const {
  const std::uint64_t h = key_hash(parent, tokens);
  const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
  const std::size_t bs = std::size_t(shape_.block_size);
  for (int b = buckets_[h & (buckets_.size() - 1)]; b >= 0; b = bucket_next_[std::size_t(b)]) {
    const std::size_t i = std::size_t(b);
    if (hash_[i] != h || parent_[i] != parent || parent_serial_[i] != parent_serial) continue;
    if (std::equal(tokens.begin(), tokens.end(), block_tokens_.begin() + std::ptrdiff_t(i * bs))) return b;
  }
  return -1;
}

void KvCache::register_block(int block, int parent, std::span<const int32_t> tokens) {
  const std::size_t i = std::size_t(block);
  const std::uint64_t h = key_hash(parent, tokens);
  registered_[i] = 1;
  serial_[i] = next_serial_++;
  parent_[i] = parent;
  parent_serial_[i] = parent < 0 ? 0 : serial_[std::size_t(parent)];
  hash_[i] = h;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + std::ptrdiff_t(i * std::size_t(shape_.block_size)));
  int& head = buckets_[h & (buckets_.size() - 1)];
  bucket_next_[i] = head;
  head = block;
}

void KvCache::unregister_block(int block) {
  const std::size_t i = std::size_t(block);
  int* link = &buckets_[hash_[i] & (buckets_.size() - 1)];
  while (*link != block) link = &bucket_next_[std::size_t(*link)];
  *link = bucket_next_[i];
  bucket_next_[i] = -1;
  registered_[i] = 0;
  serial_[i] = 0;  // a later registration of this physical block gets a new serial
}

void KvCache::lru_push_back(int block) {
  const int sentinel = int(total_blocks_);
  const int last = lru_prev_[std::size_t(sentinel)];
  lru_next_[std::size_t(last)] = block;
  lru_prev_[std::size_t(block)] = last;
  lru_next_[std::size_t(block)] = sentinel;
  lru_prev_[std::size_t(sentinel)] = block;
  ++evictable_;
}

void KvCache::lru_remove(int block) {
  const int prev = lru_prev_[std::size_t(block)], next = lru_next_[std::size_t(block)];
  lru_next_[std::size_t(prev)] = next;
  lru_prev_[std::size_t(next)] = prev;
  lru_prev_[std::size_t(block)] = lru_next_[std::size_t(block)] = -1;
  --evictable_;
}

int KvCache::attach_prefix(int seq, std::span<const int32_t> tokens) {
  checked(seq);
  Sequence& s = sequences_[std::size_t(seq)];
  if (s.length != 0 || !s.blocks.empty())
    fail("KvCache: attach_prefix to sequence ", seq, " holding ", s.length, " tokens: expected an empty sequence");
  if (!shape_.prefix_cache || tokens.empty()) return 0;
  prefix_queried_tokens_ += (long long)tokens.size();
  const std::size_t bs = std::size_t(shape_.block_size);
  const std::size_t max_blocks = std::min((tokens.size() - 1) / bs, std::size_t(shape_.max_context) / bs);
  int parent = -1;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    const int b = find_cached(parent, tokens.subspan(i * bs, bs));
    if (b < 0) break;
    if (refs_[std::size_t(b)]++ == 0) lru_remove(b);
    s.blocks.push_back(b);
    parent = b;
  }
  s.length = int(s.blocks.size() * bs);
  prefix_hit_tokens_ += s.length;
  return s.length;
}

void KvCache::publish_prefix(int seq, std::span<const int32_t> tokens) {
  checked(seq);
  if (!shape_.prefix_cache) return;
  const Sequence& s = sequences_[std::size_t(seq)];
  const std::size_t bs = std::size_t(shape_.block_size);
  const std::size_t full = std::min(tokens.size(), std::size_t(s.length)) / bs;
  int parent = -1;
  for (std::size_t i = 0; i < full; ++i) {
    const int b = s.blocks[i];
    const std::span<const int32_t> ids = tokens.subspan(i * bs, bs);
    if (registered_[std::size_t(b)]) {
      const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
      if (parent_[std::size_t(b)] != parent || parent_serial_[std::size_t(b)] != parent_serial ||
          !std::equal(ids.begin(), ids.end(), block_tokens_.begin() + std::ptrdiff_t(std::size_t(b) * bs)))
        fail("KvCache: publish_prefix for sequence ", seq, ": block ", i, " is cached under other token ids "
             "than the ones given (positions ", i * bs, "..", (i + 1) * bs - 1, ")");
    } else {
      if (find_cached(parent, ids) >= 0) return;  // cached as another block: the rest of this chain is unreachable
      register_block(b, parent, ids);
    }
    parent = b;
  }
}

float* KvCache::row(int seq, int layer, int kind, int kv_head, int pos) const {
  const Sequence& s = checked(seq);
  if (layer < 0 || layer >= shape_.layers || kv_head < 0 || kv_head >= shape_.kv_heads || pos < 0 ||
      pos >= s.length)
    fail("KvCache: row (layer ", layer, ", kv head ", kv_head, ", position ", pos, ") out of range for sequence ",
         seq, " (layers ", shape_.layers, ", kv heads ", shape_.kv_heads, ", length ", s.length, ")");
  const int block = s.blocks[std::size_t(pos / shape_.block_size)];
  const int offset = pos % shape_.block_size;
  const std::size_t head_index = (std::size_t(layer) * 2 + std::size_t(kind)) * std::size_t(shape_.kv_heads) +
                                 std::size_t(kv_head);
  return block_base(block) + head_index * head_block_floats_ + std::size_t(offset) * std::size_t(shape_.head_dim);
}

KvCache::HeadSpan KvCache::head_span(int seq, int layer, int kv_head, int pos, int end) const {
  const Sequence& s = checked(seq);
  if (end > s.length || pos >= end)
    fail("KvCache: span [", pos, ", ", end, ") out of range for sequence ", seq, " of length ", s.length);
  const int block_end = (pos / shape_.block_size + 1) * shape_.block_size;
  const int tokens = std::min(block_end, end) - pos;
  return HeadSpan{row(seq, layer, 0, kv_head, pos), row(seq, layer, 1, kv_head, pos), pos, tokens};
}

}  // namespace mi::runtime
