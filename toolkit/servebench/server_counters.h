// The serving engine's own account of a load level: its /metrics counters (components/server/server_metrics.h)
// read before and after the level, as differences. Only metainfer engines export them; for any other server (or a
// scrape that fails) the level simply has no server-side figures.
//
// Why: client-side TPOT includes the prefill steps other requests cause while a request decodes, so it understates
// what the batched decode path does. The server counts the decode passes alone, which gives the aggregate decode
// throughput (tokens from decode passes / seconds in them) and the mean batch those passes ran at.
#pragma once
#include <optional>

#include <nlohmann/json.hpp>

#include "servebench/loopback_url.h"

namespace mi::servebench {

struct ServerCounters {
  double prefill_tokens = 0;   // metainfer_prefill_forward_tokens_total
  double prefill_seconds = 0;  // metainfer_prefill_forward_seconds_total
  double decode_steps = 0;     // metainfer_decode_steps_total
  double decode_tokens = 0;    // metainfer_decode_tokens_total
  double decode_seconds = 0;   // metainfer_decode_seconds_total
};

// GET /metrics and read the counters; nullopt when the server cannot be reached or does not export all of them.
std::optional<ServerCounters> scrape_counters(const ServerUrl& url, double timeout_s);

// The counters of a Prometheus text exposition (one "name value" sample per line); nullopt unless all are present.
std::optional<ServerCounters> parse_counters(const std::string& exposition);

// after - before as a report object: decode_tok_s, mean_decode_batch, prefill_tok_s and the raw differences;
// null when either scrape is missing.
nlohmann::json server_work(const std::optional<ServerCounters>& before, const std::optional<ServerCounters>& after);

}  // namespace mi::servebench
