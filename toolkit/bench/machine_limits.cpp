#include "bench/machine_limits.h"

#include <immintrin.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "common/error.h"
#include "platform/cpu_info.h"

namespace mi::bench {
namespace {

// Multiply-accumulate loops: N independent accumulator registers, each updated by one instruction per iteration,
// so N x (lanes) x 2 FLOP per iteration. N covers latency x throughput (4 cycles x 2 ports = 8 for FMA on recent
// cores; 16 leaves margin) with registers to spare. acc = acc * a + b with a < 1 stays bounded and never denormal.
constexpr int kAccAvx512 = 16;
constexpr int kAccAvx2 = 12;  // 16 ymm registers: 12 accumulators + 2 operands

__attribute__((target("avx512f"))) double fma_avx512(long iterations) {
  const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  __m512 acc[kAccAvx512];
  for (int k = 0; k < kAccAvx512; ++k) acc[k] = _mm512_set1_ps(0.01f * float(k));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAccAvx512; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 s = acc[0];
  for (int k = 1; k < kAccAvx512; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  double sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2,fma"))) double fma_avx2(long iterations) {
  const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  __m256 acc[kAccAvx2];
  for (int k = 0; k < kAccAvx2; ++k) acc[k] = _mm256_set1_ps(0.01f * float(k));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccAvx2; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  __m256 s = acc[0];
  for (int k = 1; k < kAccAvx2; ++k) s = _mm256_add_ps(s, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// _mm512_dpbf16_ps: 16 f32 lanes, each += two bf16 products: 64 FLOP per instruction.
__attribute__((target("avx512f,avx512bf16"))) double dot_bf16(long iterations) {
  const __m512 x = _mm512_set1_ps(0.01f);
  const __m512bh v = _mm512_cvtne2ps_pbh(x, x);
  __m512 acc[kAccAvx512];
  for (int k = 0; k < kAccAvx512; ++k) acc[k] = _mm512_set1_ps(0.01f * float(k));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAccAvx512; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], v, v);
  }
  __m512 s = acc[0];
  for (int k = 1; k < kAccAvx512; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  double sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// TDPBF16PS on 4 independent 16 x 16 f32 accumulator tiles (tmm0-3) from two 16 x 32 bf16 operand tiles
// (tmm4, tmm5): 16 * 16 * 32 * 2 = 16384 FLOP per instruction. Tile contents do not change the throughput; the
// operands are zero. The tile configuration is per thread, so every call loads it (Intel SDM vol. 1, TILECFG).
struct alignas(64) TileConfig {
  unsigned char palette_id = 1, start_row = 0, reserved[14] = {};
  unsigned short colsb[16] = {};
  unsigned char rows[16] = {};
};
constexpr int kTileDpPerIteration = 4;
__attribute__((target("amx-tile,amx-bf16"))) double dot_bf16_tile(long iterations) {
  TileConfig cfg;
  for (int t = 0; t < 6; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  alignas(64) float out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return double(out[0]);
}

struct Kernel {
  std::function<double(long)> run;
  double flop_per_iteration;
};

// Best GFLOP/s of `passes` passes of `threads` threads each running the kernel; every pass lasts ~50 ms (the
// iteration count is calibrated on one thread first). Threads are released together at a barrier.
double peak_gflops(const Kernel& kernel, int threads, int passes) {
  long iterations = 1 << 16;
  while (true) {  // calibrate
    const auto t0 = std::chrono::steady_clock::now();
    volatile double keep = kernel.run(iterations);
    (void)keep;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.01 || iterations > (1L << 34)) {
      iterations = std::max(1L, long(double(iterations) * 0.05 / std::max(s, 1e-9)));
      break;
    }
    iterations *= 4;
  }
  std::barrier<> start(threads + 1), done(threads + 1);
  std::vector<double> sinks(std::size_t(threads) * 8, 0.0);
  bool quit = false;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      while (true) {
        start.arrive_and_wait();
        if (quit) return;
        sinks[std::size_t(t) * 8] += kernel.run(iterations);
        done.arrive_and_wait();
      }
    });
  double best = 1e300;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    start.arrive_and_wait();
    done.arrive_and_wait();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  quit = true;
  start.arrive_and_wait();
  for (auto& th : pool) th.join();
  volatile double keep = 0;
  for (double s : sinks) keep = keep + s;
  (void)keep;
  return kernel.flop_per_iteration * double(iterations) * threads / best / 1e9;
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return std::max(1, platform::detect_cpu().allowed_cpus);
}

}  // namespace

nlohmann::json PeakFlops::to_json() const {
  return {{"format", format}, {"isa", isa}, {"threads", threads}, {"gflops", gflops}, {"gflops_1_thread", gflops_1}};
}

PeakFlops measure_f32_fma(int threads, int passes) {
  threads = resolve_threads(threads);
  const platform::CpuInfo cpu = platform::detect_cpu();
  PeakFlops p;
  p.format = "f32_fma";
  p.threads = threads;
  Kernel k;
  if (cpu.avx512f) {
    p.isa = "avx512";
    k = {fma_avx512, double(kAccAvx512) * 16 * 2};
  } else if (cpu.avx2 && cpu.fma) {
    p.isa = "avx2";
    k = {fma_avx2, double(kAccAvx2) * 8 * 2};
  } else {
    fail("measure_f32_fma: this CPU has neither AVX-512F nor AVX2+FMA");
  }
  p.gflops_1 = peak_gflops(k, 1, passes);
  p.gflops = threads == 1 ? p.gflops_1 : std::max(p.gflops_1, peak_gflops(k, threads, passes));
  return p;
}

std::optional<PeakFlops> measure_bf16_dot(int threads, int passes) {
  threads = resolve_threads(threads);
  if (!platform::detect_cpu().avx512_bf16) return std::nullopt;
  PeakFlops p;
  p.format = "bf16_dot";
  p.isa = "avx512_bf16";
  p.threads = threads;
  const Kernel k{dot_bf16, double(kAccAvx512) * 64};
  p.gflops_1 = peak_gflops(k, 1, passes);
  p.gflops = threads == 1 ? p.gflops_1 : std::max(p.gflops_1, peak_gflops(k, threads, passes));
  return p;
}

std::optional<PeakFlops> measure_bf16_tile(int threads, int passes) {
  threads = resolve_threads(threads);
  const platform::CpuInfo cpu = platform::detect_cpu();  // amx_* only where Linux granted the tile state
  if (!cpu.amx_tile || !cpu.amx_bf16) return std::nullopt;
  PeakFlops p;
  p.format = "bf16_tile";
  p.isa = "amx_bf16";
  p.threads = threads;
  const Kernel k{dot_bf16_tile, double(kTileDpPerIteration) * 16 * 16 * 32 * 2};
  p.gflops_1 = peak_gflops(k, 1, passes);
  p.gflops = threads == 1 ? p.gflops_1 : std::max(p.gflops_1, peak_gflops(k, threads, passes));
  return p;
}

double MachineLimits::decode_bandwidth_gbs() const {
  return std::max(dram.best_gbs, working_set ? working_set->best_gbs : 0.0);
}

const PeakFlops& MachineLimits::prefill_peak(const std::string& weight_dtype) const {
  const PeakFlops* best = &f32;
  if (weight_dtype == "bf16")
    for (const auto* p : {&bf16, &bf16_tile})
      if (*p && (*p)->gflops > best->gflops) best = &**p;
  return *best;
}

nlohmann::json MachineLimits::to_json() const {
  nlohmann::json j;
  j["read_bandwidth_gbs"] = dram.best_gbs;
  j["read_bandwidth"] = dram.to_json();
  j["working_set_bandwidth_gbs"] = working_set ? nlohmann::json(working_set->best_gbs) : nlohmann::json(nullptr);
  j["working_set_bandwidth"] = working_set ? working_set->to_json() : nlohmann::json(nullptr);
  j["decode_bandwidth_gbs"] = decode_bandwidth_gbs();
  j["peak_gflops"] = {{"f32_fma", f32.to_json()},
                      {"bf16_dot", bf16 ? bf16->to_json() : nlohmann::json(nullptr)},
                      {"bf16_tile", bf16_tile ? bf16_tile->to_json() : nlohmann::json(nullptr)}};
  j["seconds"] = seconds;
  return j;
}

PeakFlops measure_peak_again(const PeakFlops& peak, int passes) {
  std::optional<PeakFlops> again;
  if (peak.format == "f32_fma") again = measure_f32_fma(peak.threads, passes);
  else if (peak.format == "bf16_dot") again = measure_bf16_dot(peak.threads, passes);
  else if (peak.format == "bf16_tile") again = measure_bf16_tile(peak.threads, passes);
  else fail("measure_peak_again: unknown peak format '" + peak.format + "'");
  if (!again) fail("measure_peak_again: " + peak.format + " is no longer available on this CPU");
  return *again;
}

PeakFlops remeasure_prefill_peak(MachineLimits& limits, const std::string& weight_dtype, int passes) {
  const auto keep_larger = [&](PeakFlops& p) {
    const PeakFlops again = measure_peak_again(p, passes);
    if (again.gflops > p.gflops) p = again;
  };
  keep_larger(limits.f32);
  if (weight_dtype == "bf16") {
    if (limits.bf16) keep_larger(*limits.bf16);
    if (limits.bf16_tile) keep_larger(*limits.bf16_tile);
  }
  return limits.prefill_peak(weight_dtype);
}

MachineLimits measure_machine_limits(const LimitsOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const int threads = resolve_threads(options.threads);
  MachineLimits m;
  platform::BandwidthOptions bo;
  bo.bytes = options.dram_bytes;
  bo.max_threads = threads;
  bo.passes = options.passes;
  m.dram = platform::probe_read_bandwidth(bo);
  if (options.working_set_bytes > 0 && options.working_set_bytes < options.dram_bytes / 2) {
    platform::BandwidthOptions ws = bo;
    ws.bytes = std::max<std::size_t>(options.working_set_bytes, std::size_t(threads) * (std::size_t(64) << 10));
    m.working_set = platform::probe_read_bandwidth(ws);
  }
  m.f32 = measure_f32_fma(threads);
  m.bf16 = measure_bf16_dot(threads);
  m.bf16_tile = measure_bf16_tile(threads);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace mi::bench
