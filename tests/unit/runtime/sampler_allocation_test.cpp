// Sampling a token allocates nothing (every buffer is sized for the vocabulary at construction), whichever filters
// are on; neither does the KV cache's per-step bookkeeping with the prefix cache on. Counted by replacing the global operator new in this test executable (test_runtime): the only
// replacement in this area - another one would clash at link time.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/prefix_cache.h"
#include "runtime/sampler.h"

#include "../counting_allocator.h"

namespace {

TEST(SamplerAllocation, CountingWorks) {
  const long before = g_allocations.load();
  void* p = ::operator new(16);
  ::operator delete(p);
  EXPECT_EQ(g_allocations.load() - before, 1);
}

TEST(SamplerAllocation, SampleAllocatesNothing) {
  const int vocab = 1000;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) logits[std::size_t(i)] = float(std::sin(0.37 * i) * 3.0);
  std::vector<int32_t> history;
  history.reserve(64);
  for (int32_t i = 0; i < 32; ++i) history.push_back(i * 7);
  std::vector<mi::runtime::SamplingParams> configs(5);
  configs[1].temperature = 0.9f;
  configs[2] = configs[1];
  configs[2].top_k = 40;
  configs[3] = configs[1];
  configs[3].top_p = 0.9f;
  configs[3].repetition_penalty = 1.3f;
  configs[4] = configs[3];
  configs[4].min_p = 0.05f;
  configs[4].top_k = 100;
  for (const auto& params : configs) {
    mi::runtime::Sampler sampler(params, vocab);
    const long before = g_allocations.load();
    for (int i = 0; i < 20; ++i) (void)sampler.sample(logits, history);
    EXPECT_EQ(g_allocations.load() - before, 0) << "temperature " << params.temperature << " top_k " << params.top_k;
  }
}

// attach / append / publish / free / clear and eviction under pressure: all storage was reserved at construction.
TEST(KvPrefixCacheAllocation, PrefixCacheBookkeepingAllocatesNothing) {
  mi::runtime::KvCacheShape shape;
  shape.layers = 1;
  shape.kv_heads = 1;
  shape.head_dim = 4;
  shape.max_sequences = 2;
  shape.max_context = 16;
  shape.block_size = 4;
  mi::runtime::KvCache cache(shape);
  mi::runtime::PrefixCache prefix(cache);
  std::vector<int32_t> prompts[2];
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 13; ++i) prompts[p].push_back(int32_t(p * 100 + i));
  const long before = g_allocations.load();
  for (int round = 0; round < 20; ++round) {
    const std::vector<int32_t>& prompt = prompts[round % 2];
    const int a = cache.allocate_sequence();
    const int cached = prefix.attach(a, prompt);
    cache.append(a, int(prompt.size()) - cached);
    prefix.publish(a, prompt);
    const int b = cache.allocate_sequence();
    cache.append(b, 8);  // pressure: evicts some cached blocks
    cache.clear_sequence(b);
    cache.free_sequence(b);
    cache.free_sequence(a);
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_GT(prefix.hit_tokens(), 0);
}

}  // namespace
