#include "servebench/percentiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mi::servebench {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * double(values.size() - 1);
  const std::size_t lo = std::size_t(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - double(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.n = values.size();
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  s.median = percentile(values, 50);
  s.p90 = percentile(values, 90);
  s.p99 = percentile(values, 99);
  return s;
}

nlohmann::json to_json(const Summary& s, double scale) {
  nlohmann::json j;
  j["n"] = s.n;
  for (const auto& [key, v] : {std::pair{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p99", s.p99}})
    j[key] = s.n == 0 ? nlohmann::json(nullptr) : nlohmann::json(v * scale);
  return j;
}

}  // namespace mi::servebench
