// `metainfer bench`: an engine's latency and throughput over a workload matrix, each result beside the machine's
// bound, optionally interleaved with a baseline engine's command (README "Benchmarks"). The report is one JSON
// object (format "metainfer-bench/1"); report.h renders it as Markdown, svg_plot.h as an SVG chart.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/workload.h"
#include "common/error.h"

namespace mi::bench {

struct BenchOptions {
  std::filesystem::path engine_dir;    // a generated engine with its B0-built binary
  std::filesystem::path model;         // empty: the engine's checkpoint (MANIFEST constraints.model)
  Matrix matrix = matrix_named("paper");
  int runs = 3;                        // measured runs per cell (mean +- stddev)
  int warmup = 1;                      // unmeasured runs per cell before them
  int threads = 0;                     // 0: the engine's compiled threads, else every allowed CPU
  std::string baseline_cmd;            // empty: no baseline
  double timeout_s = 1800;             // per engine or baseline run
  bool supplementary = true;           // the chunked-prefill and batch-scaling studies
  std::vector<int> batch_sizes = {1, 2, 4, 8};  // batch scaling (ENGINE bench --parts batch)
  bool profile = false;                // per-op profile (ENGINE bench --parts profile with the measured limits)
  std::size_t dram_bytes = std::size_t(1) << 30;
  std::ostream* progress = nullptr;    // progress lines (cell, run, elapsed, ETA); nullptr: none
};

// The engine under test failed where the bench cannot go on (the start-up runs): a failure (exit 1), not bad input.
class EngineFailure : public Error {
 public:
  using Error::Error;
};

// Runs everything and returns the report. mi::Error for bad input (no engine, no built binary, no cell that fits
// the engine's context); a failing engine or baseline run is recorded in the report ("errors"), not thrown.
nlohmann::json run_bench(const BenchOptions& options);

// Metric names of a cell, in table order, with units (README "Benchmarks" defines them).
struct MetricInfo {
  const char* key;
  const char* label;
};
const std::vector<MetricInfo>& cell_metrics();

}  // namespace mi::bench
