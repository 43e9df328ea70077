#include "platform/bandwidth.h"

#include <immintrin.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace mi::platform {
namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kMinBytesPerThread = std::size_t(1) << 20;     // measure_read_bandwidth_gbs
constexpr std::size_t kMinProbeBytesPerThread = std::size_t(64) << 10;  // probe_read_bandwidth (cache sizes)
constexpr std::size_t kMinPassBytes = std::size_t(256) << 20;          // small buffers are re-read up to this
// Software prefetch distance: on one core of a Xeon (Emerald Rapids) it raised the measured read bandwidth from
// ~11.5 to ~13.5 GB/s over hardware prefetching alone, so the probe reports what a well-written kernel can get.
constexpr std::size_t kPrefetchBytes = 4096;

// A read kernel: K streams at p, p + block, ..., p + (K-1) * block, each `block` bytes (a multiple of 256), read
// in lock step, L lines of each stream per step; returns a sum of every 64-bit lane so the loads cannot be
// optimised away. Prefetches past the end are harmless (they never fault).
using ReadFn = uint64_t (*)(const std::byte* p, std::size_t block);

template <int K, int L, bool PF>
__attribute__((target("avx512f"))) uint64_t read_avx512(const std::byte* p, std::size_t block) {
  __m512i acc[K * L];
  for (int a = 0; a < K * L; ++a) acc[a] = _mm512_setzero_si512();
  for (std::size_t i = 0; i < block; i += kLine * L) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const std::byte* s = p + std::size_t(k) * block + i;
#pragma GCC unroll 4
      for (int l = 0; l < L; ++l) {
        if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(s + kLine * l) + kPrefetchBytes, _MM_HINT_T0);
        acc[k * L + l] = _mm512_add_epi64(acc[k * L + l], _mm512_load_si512(s + kLine * l));
      }
    }
  }
  __m512i s = acc[0];
  for (int a = 1; a < K * L; ++a) s = _mm512_add_epi64(s, acc[a]);
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

template <int K, int L, bool PF>
__attribute__((target("avx2"))) uint64_t read_avx2(const std::byte* p, std::size_t block) {
  __m256i acc[K * L];
  for (int a = 0; a < K * L; ++a) acc[a] = _mm256_setzero_si256();
  for (std::size_t i = 0; i < block; i += kLine * L) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const std::byte* s = p + std::size_t(k) * block + i;
#pragma GCC unroll 4
      for (int l = 0; l < L; ++l) {
        if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(s + kLine * l) + kPrefetchBytes, _MM_HINT_T0);
        const __m256i* v = reinterpret_cast<const __m256i*>(s + kLine * l);
        acc[k * L + l] = _mm256_add_epi64(acc[k * L + l], _mm256_load_si256(v));
        acc[k * L + l] = _mm256_add_epi64(acc[k * L + l], _mm256_load_si256(v + 1));
      }
    }
  }
  __m256i s = acc[0];
  for (int a = 1; a < K * L; ++a) s = _mm256_add_epi64(s, acc[a]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

template <int K, int L, bool PF>
uint64_t read_sse2(const std::byte* p, std::size_t block) {
  __m128i acc[K * L];
  for (int a = 0; a < K * L; ++a) acc[a] = _mm_setzero_si128();
  for (std::size_t i = 0; i < block; i += kLine * L) {
    for (int k = 0; k < K; ++k) {
      const std::byte* s = p + std::size_t(k) * block + i;
      for (int l = 0; l < L; ++l) {
        if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(s + kLine * l) + kPrefetchBytes, _MM_HINT_T0);
        const __m128i* v = reinterpret_cast<const __m128i*>(s + kLine * l);
        for (int q = 0; q < 4; ++q) acc[k * L + l] = _mm_add_epi64(acc[k * L + l], _mm_load_si128(v + q));
      }
    }
  }
  __m128i s = acc[0];
  for (int a = 1; a < K * L; ++a) s = _mm_add_epi64(s, acc[a]);
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), s);
  return lanes[0] + lanes[1];
}

struct Pattern {
  const char* name;
  int streams;
  ReadFn avx512, avx2, sse2;
};

template <int K, int L, bool PF>
Pattern pattern(const char* name) {
  return {name, K, &read_avx512<K, L, PF>, &read_avx2<K, L, PF>, &read_sse2<K, L, PF>};
}

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> all = {pattern<1, 4, true>("stream1"),      pattern<1, 4, false>("stream1-nopf"),
                                           pattern<4, 1, true>("stream4"),      pattern<4, 1, false>("stream4-nopf"),
                                           pattern<8, 1, true>("stream8"),      pattern<8, 1, false>("stream8-nopf")};
  return all;
}

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

// Runs `threads` persistent workers; each timed pass releases them at a barrier and waits for all of them at a
// second one, so thread start-up is not timed (it would dominate a pass over a cache-sized buffer).
class ReadPool {
 public:
  ReadPool(std::byte* buffer, std::size_t slice, int threads)
      : buffer_(buffer), slice_(slice), threads_(threads), start_(threads + 1), done_(threads + 1),
        sinks_(std::size_t(threads) * 8, 0), cpu_(std::size_t(threads) * 8, 0.0) {
    for (int t = 0; t < threads; ++t) pool_.emplace_back([this, t] { work(t); });
  }
  ~ReadPool() {
    quit_ = true;
    start_.arrive_and_wait();
    for (auto& th : pool_) th.join();
  }
  // One timed pass: seconds by the chosen clock.
  double pass(ReadFn fn, std::size_t block, int repeats, BandwidthClock clock) {
    fn_ = fn;
    block_ = block;
    repeats_ = repeats;
    const auto t0 = std::chrono::steady_clock::now();
    start_.arrive_and_wait();
    done_.arrive_and_wait();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (clock == BandwidthClock::wall) return wall;
    double slowest = 0;
    for (int t = 0; t < threads_; ++t) slowest = std::max(slowest, cpu_[std::size_t(t) * 8]);
    return slowest;
  }
  uint64_t sink() const {
    uint64_t s = 0;
    for (uint64_t v : sinks_) s += v;
    return s;
  }

 private:
  void work(int t) {
    while (true) {
      start_.arrive_and_wait();
      if (quit_) return;
      const std::byte* p = buffer_ + std::size_t(t) * slice_;
      const double c0 = thread_cpu_seconds();
      uint64_t s = 0;
      for (int r = 0; r < repeats_; ++r) s += fn_(p, block_);
      cpu_[std::size_t(t) * 8] = thread_cpu_seconds() - c0;
      sinks_[std::size_t(t) * 8] += s;  // one cache line per thread
      done_.arrive_and_wait();
    }
  }

  std::byte* buffer_;
  std::size_t slice_;
  int threads_;
  std::barrier<> start_, done_;
  std::vector<uint64_t> sinks_;
  std::vector<double> cpu_;
  std::vector<std::thread> pool_;
  ReadFn fn_ = nullptr;
  std::size_t block_ = 0;
  int repeats_ = 1;
  bool quit_ = false;
};

}  // namespace

const std::vector<std::string>& read_patterns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : patterns()) n.push_back(p.name);
    return n;
  }();
  return names;
}

std::vector<int> thread_ladder(int max_threads) {
  std::vector<int> counts;
  if (max_threads <= 8) {
    for (int t = 1; t <= std::max(1, max_threads); ++t) counts.push_back(t);
    return counts;
  }
  for (int t : {1, 2, 3, 4, 6, 8}) counts.push_back(t);
  for (int base = 8; base < max_threads; base *= 2) {
    if (base + base / 2 < max_threads) counts.push_back(base + base / 2);
    if (base * 2 < max_threads) counts.push_back(base * 2);
  }
  counts.push_back(max_threads);
  return counts;
}

double ReadBandwidth::best_at(int threads) const {
  double best = 0;
  for (const auto& s : samples)
    if (s.threads == threads) best = std::max(best, s.gbs);
  return best;
}

nlohmann::json ReadBandwidth::to_json() const {
  nlohmann::json j = {{"best_gbs", best_gbs}, {"best_pattern", best_pattern}, {"best_threads", best_threads},
                      {"isa", isa},           {"bytes", bytes},               {"passes", passes},
                      {"clock", clock},       {"samples", nlohmann::json::array()}};
  for (const auto& s : samples) j["samples"].push_back({{"pattern", s.pattern}, {"threads", s.threads}, {"gbs", s.gbs}});
  return j;
}

ReadBandwidth probe_read_bandwidth(const BandwidthOptions& options) {
  const int max_threads = options.max_threads > 0 ? options.max_threads : allowed_cpus();
  const std::vector<int> counts = options.thread_counts.empty() ? thread_ladder(max_threads) : options.thread_counts;
  int most = 1;
  for (int t : counts) {
    if (t < 1) fail("probe_read_bandwidth: threads must be >= 1, got " + std::to_string(t));
    most = std::max(most, t);
  }
  const int passes = std::max(1, options.passes);
  const std::size_t bytes = options.bytes;
  if (bytes / std::size_t(most) < kMinProbeBytesPerThread)
    fail("probe_read_bandwidth: buffer of " + std::to_string(bytes) + " bytes is too small for " + std::to_string(most) +
         " threads (need >= 64 KiB each)");
  const std::size_t total = (bytes + 4095) / 4096 * 4096;
  std::unique_ptr<std::byte, AlignedFree> buffer(static_cast<std::byte*>(std::aligned_alloc(4096, total)));
  if (!buffer) fail("probe_read_bandwidth: could not allocate " + std::to_string(total) + " bytes");

  ReadBandwidth result;
  result.isa = __builtin_cpu_supports("avx512f") ? "avx512" : __builtin_cpu_supports("avx2") ? "avx2" : "sse2";
  result.bytes = bytes;
  result.passes = passes;
  result.clock = options.clock == BandwidthClock::wall ? "wall" : "thread_cpu";

  // First touch by `most` threads, each writing its own part (places pages near the reading threads on NUMA).
  {
    const std::size_t part = total / std::size_t(most) / 4096 * 4096;
    std::vector<std::thread> pool;
    for (int t = 0; t < most; ++t)
      pool.emplace_back([&, t] {
        const std::size_t begin = std::size_t(t) * part, end = t == most - 1 ? total : begin + part;
        std::memset(buffer.get() + begin, t + 1, end - begin);
      });
    for (auto& th : pool) th.join();
  }

  uint64_t sink = 0;
  for (int threads : counts) {
    const std::size_t slice = (bytes / std::size_t(threads)) / 4096 * 4096;
    ReadPool pool(buffer.get(), slice, threads);
    for (const Pattern& p : patterns()) {
      const ReadFn fn = result.isa == "avx512" ? p.avx512 : result.isa == "avx2" ? p.avx2 : p.sse2;
      const std::size_t block = slice / std::size_t(p.streams) / 256 * 256;
      const std::size_t per_repeat = block * std::size_t(p.streams) * std::size_t(threads);
      const int repeats = int(std::max<std::size_t>(1, (kMinPassBytes + per_repeat - 1) / per_repeat));
      double best_seconds = 1e300;
      for (int pass = 0; pass < passes; ++pass) best_seconds = std::min(best_seconds, pool.pass(fn, block, repeats, options.clock));
      const double gbs = double(per_repeat) * repeats / best_seconds / 1e9;
      result.samples.push_back({p.name, threads, gbs});
      if (gbs > result.best_gbs) result.best_gbs = gbs, result.best_pattern = p.name, result.best_threads = threads;
    }
    sink += pool.sink();
  }
  // The sums depend on every byte read; storing them to a volatile keeps the reads from being optimised away.
  volatile uint64_t keep = sink;
  (void)keep;
  return result;
}

double measure_read_bandwidth_gbs(int threads, std::size_t bytes, BandwidthClock clock) {
  if (threads < 1) fail("measure_read_bandwidth_gbs: threads must be >= 1, got " + std::to_string(threads));
  if ((bytes / std::size_t(threads)) / 4096 * 4096 < kMinBytesPerThread)
    fail("measure_read_bandwidth_gbs: buffer of " + std::to_string(bytes) + " bytes is too small for " +
         std::to_string(threads) + " threads (need >= 1 MiB each)");
  BandwidthOptions options;
  options.bytes = bytes;
  options.thread_counts = {threads};
  options.passes = 5;
  options.clock = clock;
  return probe_read_bandwidth(options).best_gbs;
}

}  // namespace mi::platform
