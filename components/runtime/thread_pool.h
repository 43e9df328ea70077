// A fixed pool of threads for splitting one loop (rows of a matmul, heads of attention) across cores.
//
// ThreadPool(t) starts t-1 worker threads once; the calling thread is the t-th participant. A parallel_for
// neither allocates nor creates threads: the caller publishes the job (a function pointer + context on its own
// stack) and bumps an atomic generation counter; workers spin briefly on that counter, then sleep on it
// (std::atomic::wait, a futex on Linux), run their chunk, and decrement a pending counter the caller waits on.
//
// Partition is deterministic and depends only on (n, grain, threads): [0, n) is cut into units of `grain` items
// (the last one may be shorter), and the units into at most `threads` contiguous chunks of as-equal-as-possible
// unit counts; every chunk starts at a multiple of grain (useful for SIMD row tiles). Chunk c always covers the
// same range and is always run by participant c (the caller runs chunk 0), so results never depend on timing. A nested parallel_for (called from inside a chunk) runs inline on the
// calling thread. One parallel_for at a time per pool: concurrent callers are serialised by a mutex.
// An exception thrown by a chunk is rethrown in the caller after all chunks have finished.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace mi::runtime {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Participants: worker threads + the caller.
  int size() const { return threads_; }

  // Number of chunks parallel_for(n, grain, ...) uses: min(threads, ceil(n / grain)); 0 when n <= 0.
  // grain < 1 counts as 1.
  int chunk_count(int n, int grain) const;

  // fn(begin, end) over a deterministic split of [0, n).
  template <class Fn>
  void parallel_for(int n, int grain, Fn&& fn) {
    parallel_chunks(n, grain, [&fn](int /*chunk*/, int begin, int end) { fn(begin, end); });
  }

  // fn(chunk, begin, end): as parallel_for, plus the chunk index in [0, size()), e.g. to pick a per-thread
  // scratch buffer. With units = ceil(n / grain), chunk c covers units [c*units/chunks, (c+1)*units/chunks)
  // (integer division), i.e. items from grain * that, clipped to n.
  template <class Fn>
  void parallel_chunks(int n, int grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, grain, &invoke<F>, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using ChunkFn = void (*)(void* context, int chunk, int begin, int end);
  template <class F>
  static void invoke(void* context, int chunk, int begin, int end) {
    (*static_cast<F*>(context))(chunk, begin, end);
  }

  void run(int n, int grain, ChunkFn fn, void* context);
  int chunk_begin(int chunk) const;  // of the current job
  void run_chunk(int chunk);
  void worker_loop(int participant);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // serialises parallel_for calls from different threads

  // The current job, written by the caller before it bumps generation_ (release), read by workers after they
  // observe the new generation (acquire).
  ChunkFn job_fn_ = nullptr;
  void* job_context_ = nullptr;
  int job_n_ = 0;
  int job_grain_ = 1;
  int job_chunks_ = 0;

  std::atomic<std::uint32_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that still have to finish the current job
  std::atomic<bool> stop_{false};

  std::mutex error_mutex_;
  std::exception_ptr first_error_;
};

}  // namespace mi::runtime
