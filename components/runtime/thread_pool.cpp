#include "runtime/thread_pool.h"

#include <algorithm>

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MI_CPU_RELAX() _mm_pause()
#else
#define MI_CPU_RELAX() std::this_thread::yield()
#endif

namespace mi::runtime {

namespace {
// How long a waiting thread polls before it sleeps in the kernel. Short: the machines this runs on are often
// oversubscribed, and a decode step's loops are a few microseconds apart, which a short spin still covers.
constexpr int kSpinIterations = 2000;

// Set while this thread runs a chunk, so a nested parallel_for runs inline instead of deadlocking.
thread_local bool t_inside_chunk = false;

struct InsideChunk {
  bool previous = t_inside_chunk;
  InsideChunk() { t_inside_chunk = true; }
  ~InsideChunk() { t_inside_chunk = previous; }
};

// First item of `chunk` when [0, n) is split into `chunks` chunks of whole grain-sized units.
inline int split_point(int n, int grain, int chunks, int chunk) {
  const std::int64_t units = (std::int64_t(n) + grain - 1) / grain;
  return int(std::min<std::int64_t>(n, units * chunk / chunks * grain));
}
}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  if (threads < 1 || threads > 1024) fail("ThreadPool: threads must be in [1, 1024], got ", threads);
  workers_.reserve(std::size_t(threads - 1));
  for (int p = 1; p < threads; ++p) workers_.emplace_back([this, p] { worker_loop(p); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::chunk_count(int n, int grain) const {
  if (n <= 0) return 0;
  const int g = std::max(grain, 1);
  const int by_grain = int((std::int64_t(n) + g - 1) / g);
  return std::max(1, std::min(threads_, by_grain));
}

int ThreadPool::chunk_begin(int chunk) const { return split_point(job_n_, job_grain_, job_chunks_, chunk); }

void ThreadPool::run_chunk(int chunk) {
  const int begin = chunk_begin(chunk);
  const int end = chunk_begin(chunk + 1);
  InsideChunk guard;
  try {
    job_fn_(job_context_, chunk, begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!first_error_) first_error_ = std::current_exception();
  }
}

void ThreadPool::run(int n, int grain, ChunkFn fn, void* context) {
  grain = std::max(grain, 1);
  const int chunks = chunk_count(n, grain);
  if (chunks == 0) return;
  if (chunks == 1 || t_inside_chunk) {
    // Same partition, run on this thread: a single chunk, or a nested call from inside a chunk.
    for (int c = 0; c < chunks; ++c)
      fn(context, c, split_point(n, grain, chunks, c), split_point(n, grain, chunks, c + 1));
    return;
  }

  std::lock_guard<std::mutex> call_lock(call_mutex_);
  job_fn_ = fn;
  job_context_ = context;
  job_n_ = n;
  job_grain_ = grain;
  job_chunks_ = chunks;
  first_error_ = nullptr;
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes the job fields above
  generation_.notify_all();

  run_chunk(0);

  for (int spin = 0;; ++spin) {
    const int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (spin < kSpinIterations) {
      MI_CPU_RELAX();
    } else {
      pending_.wait(left, std::memory_order_acquire);
    }
  }
  if (first_error_) {
    std::exception_ptr error = first_error_;
    first_error_ = nullptr;
    std::rethrow_exception(error);
  }
}

void ThreadPool::worker_loop(int participant) {
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t current = generation_.load(std::memory_order_acquire);
    for (int spin = 0; current == seen && spin < kSpinIterations; ++spin) {
      MI_CPU_RELAX();
      current = generation_.load(std::memory_order_acquire);
    }
    while (current == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load(std::memory_order_relaxed)) return;
    if (participant < job_chunks_) run_chunk(participant);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace mi::runtime
