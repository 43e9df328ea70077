#include "agents/retry_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace mi::agents {

double RetryPolicy::delay_s(int next_attempt, const std::optional<double>& retry_after_s) const {
  if (retry_after_s) return std::clamp(*retry_after_s, 0.0, max_backoff_s);
  const double d = initial_backoff_s * std::pow(2.0, std::max(0, next_attempt - 2));
  return std::clamp(d, 0.0, max_backoff_s);
}

std::optional<double> parse_retry_after(const std::string& value) {
  if (value.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (!end || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

}  // namespace mi::agents
