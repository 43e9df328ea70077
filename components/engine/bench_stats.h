// Mean +- sample standard deviation of repeated bench runs (`ENGINE bench`), as `metainfer bench` reports them:
// {"mean", "stddev", "n"} over the finite values (a rate lost in timing noise is NaN and not counted), null when none.
#pragma once
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::engine {

struct RunStat {
  double mean = 0, stddev = 0;
  int n = 0;
  nlohmann::ordered_json to_json() const {
    if (n == 0) return nullptr;
    return {{"mean", mean}, {"stddev", stddev}, {"n", n}};
  }
};

inline RunStat summarize_runs(const std::vector<double>& values) {
  RunStat s;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v, ++s.n;
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  if (s.n > 1) {
    double sq = 0;
    for (double v : values)
      if (std::isfinite(v)) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / (s.n - 1));
  }
  return s;
}

}  // namespace mi::engine
