// When and how long to wait before retrying an LLM request. Hosted endpoints shed load with 429 and fail
// transiently with 5xx; both are retried with exponential backoff, and a server's Retry-After (seconds) is honoured
// because it knows its own rate window better than our backoff does. Any other 4xx is the request's fault and is
// never retried: repeating it would spend the budget for the same answer.
#pragma once
#include <optional>
#include <string>

namespace mi::agents {

struct RetryPolicy {
  int max_attempts = 5;            // the first try included
  double initial_backoff_s = 1.0;  // wait after the first failure; doubles each time
  double max_backoff_s = 60.0;     // cap for both our backoff and a server's Retry-After

  // status 0 means no HTTP response (connection refused, reset, timed out).
  static bool retryable(int status) { return status == 0 || status == 408 || status == 429 || status >= 500; }
  // Seconds to wait before attempt `next_attempt` (2 = the first retry), given the failed response's Retry-After.
  double delay_s(int next_attempt, const std::optional<double>& retry_after_s) const;
};

// A Retry-After header value in seconds ("7", "0.5"); nullopt for an HTTP date or anything unparsable (the
// backoff applies then).
std::optional<double> parse_retry_after(const std::string& value);

}  // namespace mi::agents
