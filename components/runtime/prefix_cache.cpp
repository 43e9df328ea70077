#include "runtime/prefix_cache.h"

#include <algorithm>

#include "common/error.h"

namespace mi::runtime {

namespace {
std::uint64_t mix64(std::uint64_t x) {  // a strong 64-bit finaliser (splitmix64's)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

PrefixCache::PrefixCache(KvCache& cache)
    : cache_(cache), block_size_(std::size_t(cache.shape().block_size)), total_blocks_(cache.total_blocks()) {
  const std::size_t n = total_blocks_;
  registered_.assign(n, 0);
  serial_.assign(n, 0);
  parent_.assign(n, -1);
  parent_serial_.assign(n, 0);
  hash_.assign(n, 0);
  block_tokens_.assign(n * block_size_, 0);
  bucket_next_.assign(n, -1);
  std::size_t buckets = 1;
  while (buckets < n) buckets *= 2;
  buckets_.assign(buckets, -1);
  lru_prev_.assign(n + 1, int(n));  // empty circular list around the sentinel n
  lru_next_.assign(n + 1, int(n));
  cache_.attach_sharing(*this);
}

PrefixCache::~PrefixCache() { cache_.detach_sharing(*this); }

// A published block stays matchable after its last sequence; an unpublished one goes back to the free list.
bool PrefixCache::keep_unreferenced(int block) {
  if (!registered_[std::size_t(block)]) return false;
  lru_push_back(block);
  return true;
}

int PrefixCache::reclaim_block() {
  const int b = lru_next_[total_blocks_];  // least recently used cached block
  lru_remove(b);
  unregister_block(b);
  return b;
}

std::uint64_t PrefixCache::key_hash(int parent, std::span<const int32_t> tokens) const {
  const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
  std::uint64_t h = mix64(std::uint64_t(std::int64_t(parent)) ^ (parent_serial << 32) ^ (parent_serial >> 32));
  for (const int32_t t : tokens) h = mix64(h ^ std::uint64_t(std::uint32_t(t)));
  return h & hash_mask_;
}

int PrefixCache::find_cached(int parent, std::span<const int32_t> tokens) const {
  const std::uint64_t h = key_hash(parent, tokens);
  const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
  for (int b = buckets_[h & (buckets_.size() - 1)]; b >= 0; b = bucket_next_[std::size_t(b)]) {
    const std::size_t i = std::size_t(b);
    if (hash_[i] != h || parent_[i] != parent || parent_serial_[i] != parent_serial) continue;
    if (std::equal(tokens.begin(), tokens.end(), block_tokens_.begin() + std::ptrdiff_t(i * block_size_))) return b;
  }
  return -1;
}

void PrefixCache::register_block(int block, int parent, std::span<const int32_t> tokens) {
  const std::size_t i = std::size_t(block);
  const std::uint64_t h = key_hash(parent, tokens);
  registered_[i] = 1;
  serial_[i] = next_serial_++;
  parent_[i] = parent;
  parent_serial_[i] = parent < 0 ? 0 : serial_[std::size_t(parent)];
  hash_[i] = h;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + std::ptrdiff_t(i * block_size_));
  int& head = buckets_[h & (buckets_.size() - 1)];
  bucket_next_[i] = head;
  head = block;
}

void PrefixCache::unregister_block(int block) {
  const std::size_t i = std::size_t(block);
  int* link = &buckets_[hash_[i] & (buckets_.size() - 1)];
  while (*link != block) link = &bucket_next_[std::size_t(*link)];
  *link = bucket_next_[i];
  bucket_next_[i] = -1;
  registered_[i] = 0;
  serial_[i] = 0;  // a later registration of this physical block gets a new serial
}

void PrefixCache::lru_push_back(int block) {
  const int sentinel = int(total_blocks_);
  const int last = lru_prev_[std::size_t(sentinel)];
  lru_next_[std::size_t(last)] = block;
  lru_prev_[std::size_t(block)] = last;
  lru_next_[std::size_t(block)] = sentinel;
  lru_prev_[std::size_t(sentinel)] = block;
  ++evictable_;
}

void PrefixCache::lru_remove(int block) {
  const int prev = lru_prev_[std::size_t(block)], next = lru_next_[std::size_t(block)];
  lru_next_[std::size_t(prev)] = next;
  lru_prev_[std::size_t(next)] = prev;
  lru_prev_[std::size_t(block)] = lru_next_[std::size_t(block)] = -1;
  --evictable_;
}

int PrefixCache::attach(int seq, std::span<const int32_t> tokens) {
  const int held = cache_.length(seq);  // mi::Error for a sequence that is not alive
  if (held != 0)
    fail("PrefixCache: attach to sequence ", seq, " holding ", held, " tokens: expected an empty sequence");
  if (tokens.empty()) return 0;
  queried_tokens_ += (long long)tokens.size();
  const std::size_t max_context = std::size_t(cache_.shape().max_context);
  const std::size_t max_blocks = std::min((tokens.size() - 1) / block_size_, max_context / block_size_);
  int parent = -1;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    const int b = find_cached(parent, tokens.subspan(i * block_size_, block_size_));
    if (b < 0) break;
    if (cache_.block_refs(b) == 0) lru_remove(b);  // cached, held by no sequence: in use again
    cache_.adopt_block(seq, b);
    parent = b;
  }
  const int attached = cache_.length(seq);
  hit_tokens_ += attached;
  return attached;
}

void PrefixCache::publish(int seq, std::span<const int32_t> tokens) {
  const std::span<const int> table = cache_.block_table(seq);  // mi::Error for a sequence that is not alive
  const std::size_t full = std::min(tokens.size(), std::size_t(cache_.length(seq))) / block_size_;
  int parent = -1;
  for (std::size_t i = 0; i < full; ++i) {
    const int b = table[i];
    const std::span<const int32_t> ids = tokens.subspan(i * block_size_, block_size_);
    if (registered_[std::size_t(b)]) {
      const std::uint64_t parent_serial = parent < 0 ? 0 : serial_[std::size_t(parent)];
      if (parent_[std::size_t(b)] != parent || parent_serial_[std::size_t(b)] != parent_serial ||
          !std::equal(ids.begin(), ids.end(), block_tokens_.begin() + std::ptrdiff_t(std::size_t(b) * block_size_)))
        fail("PrefixCache: publish for sequence ", seq, ": block ", i, " is cached under other token ids "
             "than the ones given (positions ", i * block_size_, "..", (i + 1) * block_size_ - 1, ")");
    } else {
      if (find_cached(parent, ids) >= 0) return;  // cached as another block: the rest of this chain is unreachable
      register_block(b, parent, ids);
    }
    parent = b;
  }
}

}  // namespace mi::runtime
