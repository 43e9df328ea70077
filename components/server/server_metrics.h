// The server's counters and latency histograms, rendered as Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/) for GET /metrics. Thread-safe: the HTTP threads
// count requests, the serving loop records tokens and latencies, a scrape reads everything under one lock.
//
// Names (prefix metainfer_):
//   requests_total{endpoint,status}             counter    HTTP requests answered, by route and outcome: the status
//                                                          code, 500 for one that failed after its 200 header (its
//                                                          body carries the error object), 499 client went away
//   prompt_tokens_total, generation_tokens_total counter    tokens prefilled (cached ones included) / sampled
//   prefix_cache_queried_tokens_total            counter    prompt tokens looked up in the prefix cache
//   prefix_cache_hit_tokens_total                counter    of them found (reused, not recomputed)
//   prefix_cache_hit_rate                        gauge      hit / queried since start (0 when nothing was queried)
//   requests_running, requests_waiting           gauge      in the scheduler now
//   kv_cache_usage_ratio                         gauge      KV blocks held by running requests / all blocks
//   kv_cache_cached_blocks                       gauge      unreferenced blocks kept for prefix reuse
//   time_to_first_token_seconds                  histogram  arrival -> first token sampled
//   time_per_output_token_seconds                histogram  (last token - first token) / (tokens - 1), per request
//   e2e_request_latency_seconds                  histogram  arrival -> finished
//   queue_time_seconds                           histogram  arrival -> admitted
//   prefill_forward_tokens_total                 counter    prompt tokens run through the model (cache hits not)
//   prefill_forward_seconds_total                counter    wall time of those prefill forwards
//   decode_steps_total                           counter    batched decode passes (one per step with decodes)
//   decode_tokens_total                          counter    tokens those passes produced (one per running sequence)
//   decode_seconds_total                         counter    wall time of the decode passes (forward and sampling)
//   decode_batch_size                            histogram  sequences per decode pass
// The decode counters measure the batched decode path alone: aggregate decode throughput = delta decode_tokens /
// delta decode_seconds over an interval, without the prefill steps that clients also wait through (their TPOT
// includes those; serve-bench reports both).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mi::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // "# HELP/# TYPE" lines, the cumulative buckets, _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the serving loop reports at a scrape (read by the loop's owner under its own lock).
struct LoopGauges {
  int running = 0;
  int waiting = 0;
  long long kv_blocks_used = 0;
  long long kv_blocks_total = 0;
  long long kv_blocks_cached = 0;
  long long prefix_queried_tokens = 0;
  long long prefix_hit_tokens = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(const std::string& endpoint, int status);
  void count_tokens(long long prompt, long long generated);
  void observe_request(double ttft_s, double tpot_s, bool has_tpot, double e2e_s, double queue_s);
  // One serving step: the prefill tokens it computed and how long that took, and its decode pass (0 tokens: none).
  void observe_step(long long prefill_tokens, double prefill_s, long long decode_tokens, double decode_s);

  std::string render(const LoopGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  long long prompt_tokens_ = 0;
  long long generation_tokens_ = 0;
  long long prefill_forward_tokens_ = 0;
  double prefill_forward_seconds_ = 0;
  long long decode_steps_ = 0;
  long long decode_tokens_ = 0;
  double decode_seconds_ = 0;
  Histogram ttft_, tpot_, e2e_, queue_, decode_batch_;
};

}  // namespace mi::server
