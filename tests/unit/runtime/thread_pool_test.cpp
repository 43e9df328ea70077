#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "common/error.h"

using mi::runtime::ThreadPool;

TEST(ThreadPool, RejectsBadThreadCount) {
  EXPECT_THROW(ThreadPool(0), mi::Error);
  EXPECT_THROW(ThreadPool(-3), mi::Error);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 2, 5, 16, 17, 100, 1001}) {
      for (int grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        pool.parallel_for(n, grain, [&](int b, int e) {
          for (int i = b; i < e; ++i) hits[std::size_t(i)].fetch_add(1);
        });
        for (int i = 0; i < n; ++i) ASSERT_EQ(hits[std::size_t(i)].load(), 1) << threads << " " << n << " " << grain;
      }
    }
  }
}

TEST(ThreadPool, PartitionIsDeterministicAndRespectsGrain) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.chunk_count(0, 1), 0);
  EXPECT_EQ(pool.chunk_count(10, 1), 4);
  EXPECT_EQ(pool.chunk_count(10, 5), 2);
  EXPECT_EQ(pool.chunk_count(10, 100), 1);
  // The same call always gives every chunk index the same range.
  std::vector<std::pair<int, int>> first(4, {-1, -1});
  for (int repeat = 0; repeat < 50; ++repeat) {
    std::vector<std::pair<int, int>> ranges(4, {-1, -1});
    pool.parallel_chunks(103, 1, [&](int chunk, int b, int e) { ranges[std::size_t(chunk)] = {b, e}; });
    if (repeat == 0) first = ranges;
    ASSERT_EQ(ranges, first);
  }
  EXPECT_EQ(first[0], std::make_pair(0, 25));
  EXPECT_EQ(first[3].second, 103);
  // Chunks start at multiples of grain: 103 items in units of 16 -> 7 units over 4 chunks: 1, 2, 2, 2 units.
  std::vector<std::pair<int, int>> ranges(4, {-1, -1});
  pool.parallel_chunks(103, 16, [&](int chunk, int b, int e) { ranges[std::size_t(chunk)] = {b, e}; });
  const std::vector<std::pair<int, int>> expected = {{0, 16}, {16, 48}, {48, 80}, {80, 103}};
  EXPECT_EQ(ranges, expected);
}

TEST(ThreadPool, ChunksRunOnDifferentThreads) {
  ThreadPool pool(3);
  std::vector<std::thread::id> ids(3);
  pool.parallel_chunks(3, 1, [&](int chunk, int, int) { ids[std::size_t(chunk)] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());  // the caller runs chunk 0
  EXPECT_NE(ids[1], ids[0]);
  EXPECT_NE(ids[2], ids[0]);
  EXPECT_NE(ids[1], ids[2]);
}

TEST(ThreadPool, ManyCallsInARowAndNesting) {
  ThreadPool pool(4);
  long total = 0;
  for (int call = 0; call < 2000; ++call) {
    std::atomic<long> sum{0};
    pool.parallel_for(64, 1, [&](int b, int e) {
      for (int i = b; i < e; ++i) sum += i;
    });
    total += sum.load();
  }
  EXPECT_EQ(total, 2000L * (63 * 64 / 2));
  // A nested parallel_for runs inline and still covers its range.
  std::atomic<int> inner{0};
  pool.parallel_for(4, 1, [&](int b, int e) {
    for (int i = b; i < e; ++i) pool.parallel_for(10, 1, [&](int ib, int ie) { inner += ie - ib; });
  });
  EXPECT_EQ(inner.load(), 40);
}

TEST(ThreadPool, ExceptionInAChunkReachesTheCaller) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(4, 1,
                                 [&](int b, int) {
                                   if (b == 2) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  // The pool stays usable.
  std::atomic<int> count{0};
  pool.parallel_for(8, 1, [&](int b, int e) { count += e - b; });
  EXPECT_EQ(count.load(), 8);
}
