// The serving loop's prefix reuse in engines built without the prefix cache (runtime.prefix_cache off): the
// interface of runtime::PrefixCache (runtime/prefix_cache.h) with nothing behind it. Every request prefills its
// whole prompt; the generated engine_features.h names this type, so the prefix cache's code is not in the engine.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/kv_cache.h"

namespace mi::server {

struct NoPrefixCache {
  static constexpr bool kReusesPrefixes = false;

  explicit NoPrefixCache(runtime::KvCache&) {}
  int attach(int, std::span<const int32_t>) { return 0; }  // nothing cached: the whole prompt is computed
  void publish(int, std::span<const int32_t>) {}
  std::size_t cached_blocks() const { return 0; }
  long long queried_tokens() const { return 0; }
  long long hit_tokens() const { return 0; }
};

}  // namespace mi::server
