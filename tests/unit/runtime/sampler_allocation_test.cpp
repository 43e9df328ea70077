// Sampling a token allocates nothing (every buffer is sized for the vocabulary at construction), whichever filters
// are on. Counted by replacing the global operator new in this test executable (test_runtime): the only
// replacement in this area - another one would clash at link time.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "runtime/sampler.h"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

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

}  // namespace
