// serve-bench's report: per concurrency level the completed and failed requests, the duration, request and output
// token throughput, and mean/median/p90/p99 of TTFT, TPOT, ITL and E2E latency (README "serve-bench" defines
// each). JSON (format "metainfer-serve-bench/1") and Markdown rendered from it.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "servebench/load_run.h"
#include "servebench/workload.h"

namespace mi::servebench {

inline constexpr const char* kReportFormat = "metainfer-serve-bench/1";

// The level's figures (metrics over completed requests only; failures counted, grouped by message).
nlohmann::json level_report(const LevelRun& run);

// {"format", "settings", "levels", "failed_requests", "deadline_reached", "notes"}.
nlohmann::json make_report(const Workload& w, double deadline_s, const std::vector<LevelRun>& runs);

std::string to_markdown(const nlohmann::json& report);

}  // namespace mi::servebench
