// One concurrency level of serve-bench: `concurrency` worker threads, each with its own connection, pull request
// numbers from a shared counter until `requests` have been sent or the global deadline has passed. No request is
// retried; the level ends when every worker has its last response (or its timeout). Duration runs from the first
// send to the last worker's end, as vLLM's benchmark duration does. The server's /metrics counters are read just
// before and after the level (servebench/server_counters.h), outside the timed span.
#pragma once
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "servebench/request_result.h"
#include "servebench/workload.h"

namespace mi::servebench {

struct LevelRun {
  int concurrency = 0;
  int requests_planned = 0;
  int requests_sent = 0;          // < planned when the deadline stopped the level
  bool deadline_reached = false;
  double duration_s = 0;
  std::vector<RequestResult> results;  // one per request sent, in request-number order
  nlohmann::json server = nullptr;     // servebench/server_counters.h server_work over the level, or null
};

LevelRun run_level(const Workload& w, int concurrency, int requests, Clock::time_point deadline, std::ostream* progress = nullptr);

}  // namespace mi::servebench
