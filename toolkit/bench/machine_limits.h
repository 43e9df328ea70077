// The machine's limits, measured by the bench harness itself (README "Benchmarks"): the bounds every result is shown
// against.
//   read bandwidth   platform::probe_read_bandwidth: the best of several access patterns over 1..N threads on a
//                    >= 1 GiB buffer (DRAM), and the same probe on a buffer the size of the model's working set
//                    (for a model that fits in the caches, the caches are its bound)
//   peak FLOP/s      every allowed CPU running a multiply-accumulate loop with enough independent accumulators to
//                    hide the instruction latency: F32 FMA (AVX-512 when present, else AVX2 FMA) and the BF16 dot
//                    product (_mm512_dpbf16_ps; only where AVX512_BF16 is present) and the BF16 tile product (AMX
//                    TDPBF16PS; only where AMX-BF16 is present and Linux grants the tile state). Best of several passes.
//                    The prefill bound for bf16 weights is the largest of them, so no kernel on this CPU can beat it.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "platform/bandwidth.h"

namespace mi::bench {

struct PeakFlops {
  std::string format;    // "f32_fma" | "bf16_dot" | "bf16_tile"
  std::string isa;       // "avx512" | "avx2" | "avx512_bf16" | "amx_bf16"
  int threads = 0;
  double gflops = 0;     // all threads together, 1e9 FLOP/s (a multiply-add counts 2)
  double gflops_1 = 0;   // one thread
  nlohmann::json to_json() const;
};

struct MachineLimits {
  platform::ReadBandwidth dram;                      // >= 1 GiB buffer
  std::optional<platform::ReadBandwidth> working_set;  // buffer of the model's working set, when smaller than dram's
  PeakFlops f32;
  std::optional<PeakFlops> bf16;                     // only with AVX512_BF16
  std::optional<PeakFlops> bf16_tile;                // only with AMX-BF16 granted by the OS
  double seconds = 0;                                // how long measuring took

  // The bandwidth a decode of `working_set_bytes` can at best see: the larger of the DRAM figure and the
  // working-set figure (a working set larger than the caches measures ~DRAM anyway).
  double decode_bandwidth_gbs() const;
  // Peak for a prefill with weights of `dtype`: for "bf16" the largest of F32 FMA, the BF16 dot product and the BF16
  // tile product; otherwise F32 FMA.
  const PeakFlops& prefill_peak(const std::string& weight_dtype) const;
  nlohmann::json to_json() const;
};

struct LimitsOptions {
  int threads = 0;                                    // 0: every CPU this process may use
  std::size_t dram_bytes = std::size_t(1) << 30;      // >= 1 GiB for the bound
  std::size_t working_set_bytes = 0;                  // 0: no working-set probe
  int passes = 4;
};

// F32 FMA peak at `threads` threads (and one thread), best of `passes`.
PeakFlops measure_f32_fma(int threads, int passes = 5);
// BF16 dot-product peak; std::nullopt without AVX512_BF16.
std::optional<PeakFlops> measure_bf16_dot(int threads, int passes = 5);
// AMX BF16 tile-product peak; std::nullopt without AMX-BF16 or when Linux refuses the tile state.
std::optional<PeakFlops> measure_bf16_tile(int threads, int passes = 5);

MachineLimits measure_machine_limits(const LimitsOptions& options);

// `peak` measured again (same format, ISA and threads), best of `passes`: a shared host that steals cycles during one
// measurement reports too low a peak, so a run keeps the largest of several measurements (bench.cpp).
PeakFlops measure_peak_again(const PeakFlops& peak, int passes);
// Every format prefill_peak(weight_dtype) chooses from measured again (best of `passes`), each kept at the larger of
// its old and new figure in `limits`; returns the prefill peak after the update. So a start measurement that was
// slowed on the format that is really the fastest does not stay the loser for the whole run.
PeakFlops remeasure_prefill_peak(MachineLimits& limits, const std::string& weight_dtype, int passes);

}  // namespace mi::bench
