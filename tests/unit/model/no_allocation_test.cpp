// A decode step allocates nothing: the thread pool, the KV cache append and every component run on memory
// reserved at setup. Counted by replacing the global operator new in this test executable.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "dense_forward.h"
#include "kernels/scalar/scalar.h"

#include "../counting_allocator.h"

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
