// Sustained memory read bandwidth of this machine, measured by streaming through a buffer much larger than the
// last-level cache. Decode (one token at a time) reads every weight once per token, so this number bounds the
// decode speed of an engine: tokens/s <= bandwidth / bytes of weights read per token.
#pragma once
#include <cstddef>

namespace mi::platform {

// Which clock divides the bytes read: wall time (the definition; use on an otherwise idle machine), or the CPU
// time of the slowest reading thread (CLOCK_THREAD_CPUTIME_ID), an estimate of what the threads see while they
// run when the machine is shared and they are time-sliced with other processes.
enum class BandwidthClock { wall, thread_cpu };

// Best (highest) of several passes of `threads` threads each reading a disjoint 1/threads slice of a `bytes`
// buffer, in GB/s (1e9 bytes per second). Uses 256-bit AVX2 loads when the CPU has AVX2 (so the figure is what
// an AVX2 or wider kernel can see), 128-bit SSE2 loads otherwise. Allocates and touches `bytes` of memory.
// Throws mi::Error when threads < 1 or bytes is too small to measure (< 1 MiB per thread).
double measure_read_bandwidth_gbs(int threads, std::size_t bytes = std::size_t(1) << 30,
                                  BandwidthClock clock = BandwidthClock::wall);

}  // namespace mi::platform
