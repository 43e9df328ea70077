// Summary statistics of a serving metric: mean, median, p90, p99. Percentiles interpolate linearly between the
// closest ranks (rank = p/100 * (n - 1)), numpy.percentile's default, as vLLM's serving benchmark reports them.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::servebench {

// p in [0, 100]; `values` need not be sorted; empty -> NaN.
double percentile(std::vector<double> values, double p);

struct Summary {
  std::size_t n = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0;  // meaningful only when n > 0
};

Summary summarize(const std::vector<double>& values);

// {"n", "mean", "median", "p90", "p99"}, each scaled by `scale` (1000 for seconds -> ms); the statistics are null
// when n == 0.
nlohmann::json to_json(const Summary& s, double scale = 1.0);

}  // namespace mi::servebench
