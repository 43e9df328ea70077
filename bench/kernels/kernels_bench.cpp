// Kernel throughput on Qwen3-0.6B shapes, per x86 level, single thread:
//   - read bandwidth of this machine (1 and 2 threads; toolkit/platform/bandwidth.h), by wall clock and by the
//     reading threads' CPU time (the latter is what a time-sliced thread sees on a shared, loaded machine),
//   - decode matvec, bf16 weights: [3072 x 1024] (MLP gate/up; 6 MiB, cache-resident on large-L3 CPUs) and
//     [151936 x 1024] (LM head; 297 MiB, streamed from DRAM), reported as GB/s of weights streamed and as a
//     fraction of the 1-thread read bandwidth by CPU time ("of_read_bw"; Google Benchmark rates use CPU time too),
//   - prefill matmul, M = 128 tokens x [3072 x 1024] bf16 weights, reported as GFLOP/s (2*M*rows*cols per call),
//   - the same decode and prefill shapes with int8 weights + one f32 scale per row (ckb/contracts/int8_weights.toml),
//     GB/s counting the int8 bytes and the scales.
// Run: build with -DMETAINFER_BUILD_BENCH=ON, then
//   ./bench_kernels --benchmark_counters_tabular=true
// Levels the CPU cannot run are reported as skipped.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "kernels/kernel_levels.h"
#include "platform/bandwidth.h"

namespace {

using namespace mi::kernels;

double g_read_bw_1t = 0.0;  // GB/s by thread CPU time, measured once in main

std::vector<mi::bf16_t> random_bf16(std::size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<mi::bf16_t> v(n);
  for (auto& x : v) x = mi::f32_to_bf16(dist(gen));
  return v;
}
std::vector<float> random_f32(std::size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

template <class K>
bool skip_unsupported(benchmark::State& state) {
  if (cpu_supports(level_of<K>())) return false;
  state.SkipWithError((std::string(K::name) + " not run: CPU lacks its instruction set").c_str());
  return true;
}

// Decode: y = W x, bf16 weights; precise (f32 x) or fast (bf16 x).
template <class K, bool kFast>
void BM_Matvec(benchmark::State& state) {
  if (skip_unsupported<K>(state)) return;
  const int rows = int(state.range(0)), cols = int(state.range(1));
  const auto w = random_bf16(std::size_t(rows) * cols, 1);
  const auto x = random_f32(std::size_t(cols), 2);
  const auto xb = random_bf16(std::size_t(cols), 3);
  std::vector<float> y(static_cast<std::size_t>(rows));
  for (auto _ : state) {
    if constexpr (kFast) {
      K::matvec_fast(w.data(), std::size_t(cols), xb.data(), y.data(), rows, cols);
    } else {
      K::matvec(w.data(), std::size_t(cols), x.data(), y.data(), rows, cols);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = double(rows) * cols * sizeof(mi::bf16_t);
  state.SetBytesProcessed(int64_t(bytes) * state.iterations());
  state.counters["weights_GBps"] = benchmark::Counter(bytes / 1e9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["of_read_bw"] = benchmark::Counter(bytes / 1e9 / g_read_bw_1t * double(state.iterations()), benchmark::Counter::kIsRate);
}

// Prefill: Y = X W^T, M tokens, bf16 weights; precise (f32 X) or fast (bf16 X).
template <class K, bool kFast>
void BM_Matmul(benchmark::State& state) {
  if (skip_unsupported<K>(state)) return;
  const int M = int(state.range(0)), rows = int(state.range(1)), cols = int(state.range(2));
  const auto w = random_bf16(std::size_t(rows) * cols, 1);
  const auto x = random_f32(std::size_t(M) * cols, 2);
  const auto xb = random_bf16(std::size_t(M) * cols, 3);
  std::vector<float> y(std::size_t(M) * rows);
  for (auto _ : state) {
    if constexpr (kFast) {
      K::matmul_fast(w.data(), std::size_t(cols), xb.data(), std::size_t(cols), y.data(), std::size_t(rows), M, rows, cols);
    } else {
      K::matmul(w.data(), std::size_t(cols), x.data(), std::size_t(cols), y.data(), std::size_t(rows), M, rows, cols);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * M * rows * cols;
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

// Decode and prefill with int8 weights (one f32 scale per row), f32 activations.
template <class K>
void BM_MatvecInt8(benchmark::State& state) {
  if (skip_unsupported<K>(state)) return;
  const int rows = int(state.range(0)), cols = int(state.range(1));
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<int8_t> q(std::size_t(rows) * cols);
  for (auto& v : q) v = int8_t(dist(gen));
  const auto scale = random_f32(std::size_t(rows), 4);
  const auto x = random_f32(std::size_t(cols), 2);
  std::vector<float> y(static_cast<std::size_t>(rows));
  for (auto _ : state) {
    K::matvec(q.data(), scale.data(), std::size_t(cols), x.data(), y.data(), rows, cols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = double(rows) * cols + double(rows) * sizeof(float);
  state.SetBytesProcessed(int64_t(bytes) * state.iterations());
  state.counters["weights_GBps"] = benchmark::Counter(bytes / 1e9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["of_read_bw"] = benchmark::Counter(bytes / 1e9 / g_read_bw_1t * double(state.iterations()), benchmark::Counter::kIsRate);
}

template <class K>
void BM_MatmulInt8(benchmark::State& state) {
  if (skip_unsupported<K>(state)) return;
  const int M = int(state.range(0)), rows = int(state.range(1)), cols = int(state.range(2));
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<int8_t> q(std::size_t(rows) * cols);
  for (auto& v : q) v = int8_t(dist(gen));
  const auto scale = random_f32(std::size_t(rows), 4);
  const auto x = random_f32(std::size_t(M) * cols, 2);
  std::vector<float> y(std::size_t(M) * rows);
  for (auto _ : state) {
    K::matmul(q.data(), scale.data(), std::size_t(cols), x.data(), std::size_t(cols), y.data(), std::size_t(rows), M, rows, cols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * M * rows * cols;
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ReadBandwidth(benchmark::State& state) {
  using mi::platform::BandwidthClock;
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    wall = mi::platform::measure_read_bandwidth_gbs(int(state.range(0)), std::size_t(1) << 30, BandwidthClock::wall);
    cpu = mi::platform::measure_read_bandwidth_gbs(int(state.range(0)), std::size_t(1) << 30,
                                                   BandwidthClock::thread_cpu);
  }
  state.counters["read_GBps_wall"] = wall;
  state.counters["read_GBps_cpu"] = cpu;
}

#define MI_DECODE(K)                                                                            \
  BENCHMARK(BM_Matvec<K, false>)->Args({3072, 1024})->Args({151936, 1024})->Unit(benchmark::kMicrosecond); \
  BENCHMARK(BM_Matvec<K, true>)->Args({3072, 1024})->Args({151936, 1024})->Unit(benchmark::kMicrosecond);
#define MI_PREFILL(K)                                                                         \
  BENCHMARK(BM_Matmul<K, false>)->Args({128, 3072, 1024})->Args({8, 3072, 1024})->Args({8, 151936, 1024})->Unit(benchmark::kMillisecond); \
  BENCHMARK(BM_Matmul<K, true>)->Args({128, 3072, 1024})->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Matvec<Scalar, false>)->Args({3072, 1024})->Unit(benchmark::kMicrosecond);
MI_DECODE(Avx2)
MI_DECODE(Avx512)
MI_DECODE(Avx512Bf16)
BENCHMARK(BM_Matmul<Scalar, false>)->Args({128, 3072, 1024})->Unit(benchmark::kMillisecond)->Iterations(1);
MI_PREFILL(Avx2)
MI_PREFILL(Avx512)
MI_PREFILL(Avx512Bf16)
#define MI_INT8(K)                                                                                                  \
  BENCHMARK(BM_MatvecInt8<K>)->Args({3072, 1024})->Args({151936, 1024})->Unit(benchmark::kMicrosecond);             \
  BENCHMARK(BM_MatmulInt8<K>)->Args({128, 3072, 1024})->Unit(benchmark::kMillisecond);
MI_INT8(Avx2)
MI_INT8(Avx512)
MI_INT8(Avx512Bf16)

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_read_bw_1t = mi::platform::measure_read_bandwidth_gbs(1, std::size_t(1) << 30,
                                                         mi::platform::BandwidthClock::thread_cpu);
  benchmark::AddCustomContext("read_bandwidth_1_thread_cpu_time_GBps", std::to_string(g_read_bw_1t));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
