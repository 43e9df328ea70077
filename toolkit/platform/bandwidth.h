// Sustained memory read bandwidth of this machine, measured by streaming through a buffer much larger than the
// last-level cache. Decode (one token at a time) reads every weight once per token, so this number bounds the
// decode speed of an engine: tokens/s <= bandwidth / bytes of weights read per token.
//
// A bound must not be beaten by any kernel, so the probe reports the BEST of several access patterns, each with the
// widest loads the CPU has (AVX-512, else AVX2, else SSE2; chosen at run time, so the toolkit still runs on
// AVX2-only machines), over thread counts 1..N:
//   stream1      each thread reads its slice front to back, with software prefetch
//   stream1-nopf the same without software prefetch (hardware prefetchers alone)
//   stream4      each thread's slice split into 4 row blocks read in lock step, one 64-byte line of each block per
//                step: how the decode kernels read their weights (a tile's rows come from far-apart row groups,
//                components/kernels/row_streams.h)
//   stream8      the same with 8 interleaved row blocks
//   stream4-nopf, stream8-nopf   the same without software prefetch, as the AVX2 decode kernels read
// Each (pattern, threads) point is the best of `passes` timed passes.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::platform {

// Which clock divides the bytes read: wall time (the definition; use on an otherwise idle machine), or the CPU
// time of the slowest reading thread (CLOCK_THREAD_CPUTIME_ID), an estimate of what the threads see while they
// run when the machine is shared and they are time-sliced with other processes.
enum class BandwidthClock { wall, thread_cpu };

struct BandwidthOptions {
  std::size_t bytes = std::size_t(1) << 30;  // buffer read per pass (all threads together); >= 1 MiB per thread
  int max_threads = 0;                       // 0: every CPU this process may use
  std::vector<int> thread_counts;            // empty: thread_ladder(max_threads)
  int passes = 4;                            // timed passes per (pattern, threads); the best counts
  BandwidthClock clock = BandwidthClock::wall;
};

struct BandwidthSample {
  std::string pattern;  // stream1 | stream1-nopf | stream4[-nopf] | stream8[-nopf]
  int threads = 0;
  double gbs = 0;       // best pass, 1e9 bytes per second
};

struct ReadBandwidth {
  double best_gbs = 0;            // max over samples: the bound
  std::string best_pattern;
  int best_threads = 0;
  std::string isa;                // "avx512" | "avx2" | "sse2": the loads used
  std::size_t bytes = 0;          // buffer size
  int passes = 0;
  std::string clock;              // "wall" | "thread_cpu"
  std::vector<BandwidthSample> samples;

  // Best over the patterns at one thread count (0 when that count was not measured).
  double best_at(int threads) const;
  nlohmann::json to_json() const;
};

// The access patterns the probe runs, in order.
const std::vector<std::string>& read_patterns();

// Thread counts probed up to `max_threads`: every count 1..max when max <= 8, else a geometric ladder
// (1, 2, 3, 4, 6, 8, 12, 16, 24, ...) that always ends at max.
std::vector<int> thread_ladder(int max_threads);

// Runs every pattern at every thread count over one buffer (allocated and first-touched once). A buffer smaller
// than the caches measures cache bandwidth: each pass then reads it repeatedly (at least 256 MiB per pass).
// Throws mi::Error when a thread count is < 1 or the buffer gives a thread less than 64 KiB.
ReadBandwidth probe_read_bandwidth(const BandwidthOptions& options = {});

// Best (highest) over the patterns at exactly `threads` threads, in GB/s: probe_read_bandwidth with one thread
// count. Allocates and touches `bytes` of memory. Throws mi::Error when threads < 1 or bytes is too small to
// measure (< 1 MiB per thread).
double measure_read_bandwidth_gbs(int threads, std::size_t bytes = std::size_t(1) << 30,
                                  BandwidthClock clock = BandwidthClock::wall);

}  // namespace mi::platform
