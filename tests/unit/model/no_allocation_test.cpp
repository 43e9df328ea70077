// A decode step allocates nothing: the thread pool, the KV cache append and every component run on memory
// reserved at setup. Counted by replacing the global operator new in this test executable.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "dense_forward.h"
#include "kernels/scalar/scalar.h"

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

template <mi::model::Numerics N>
void expect_decode_allocates_nothing() {
  const auto dir = std::filesystem::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny";
  mi_test::DenseModel<mi::kernels::Scalar, N> model(dir, 64, 3);
  std::vector<float> logits(std::size_t(model.config().vocab_size));
  const int prompt[] = {5, 6, 7, 8};
  model.forward(prompt, 4, logits.data(), false);
  int token = mi::model::greedy_token(logits.data(), model.config().vocab_size);

  const long before = g_allocations.load();
  for (int step = 0; step < 20; ++step) {  // crosses a KV block boundary (block size 16)
    model.forward(&token, 1, logits.data(), false);
    token = mi::model::greedy_token(logits.data(), model.config().vocab_size);
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
}

TEST(NoAllocation, CountingWorks) {
  const long before = g_allocations.load();
  void* p = ::operator new(16);  // an explicit call, which the compiler may not elide (unlike new int)
  ::operator delete(p);
  EXPECT_EQ(g_allocations.load() - before, 1);
}

TEST(NoAllocation, PreciseDecodeStep) { expect_decode_allocates_nothing<mi::model::Numerics::precise>(); }
TEST(NoAllocation, FastDecodeStep) { expect_decode_allocates_nothing<mi::model::Numerics::fast>(); }

}  // namespace
