#include "server/server_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mi::server {
namespace {

std::string number(double x) {
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// A label value with \, " and newline escaped (exposition format 0.0.4).
std::string label_value(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// A bucket bound as written in a config: 0.025, not 0.025000000000000001.
std::string bound(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void single(std::string& out, const std::string& name, const char* type, const std::string& help, double value) {
  header(out, name, type, help);
  out += name + " " + number(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double value) {
  const std::size_t bucket = std::size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? bound(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}),
      e2e_({0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}),
      queue_({0.001, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60}),
      decode_batch_({1, 2, 4, 8, 16, 32, 64, 128, 256}) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::count_tokens(long long prompt, long long generated) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generated;
}

void ServerMetrics::observe_request(double ttft_s, double tpot_s, bool has_tpot, double e2e_s, double queue_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(ttft_s);
  if (has_tpot) tpot_.observe(tpot_s);
  e2e_.observe(e2e_s);
  queue_.observe(queue_s);
}

void ServerMetrics::observe_step(long long prefill_tokens, double prefill_s, long long decode_tokens, double decode_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  prefill_forward_tokens_ += prefill_tokens;
  prefill_forward_seconds_ += prefill_s;
  if (decode_tokens <= 0) return;
  ++decode_steps_;
  decode_tokens_ += decode_tokens;
  decode_seconds_ += decode_s;
  decode_batch_.observe(double(decode_tokens));
}

std::string ServerMetrics::render(const LoopGauges& g) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  header(out, "metainfer_requests_total", "counter", "HTTP requests answered, by route and status code.");
  for (const auto& [key, n] : requests_)
    out += "metainfer_requests_total{endpoint=\"" + label_value(key.first) + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  single(out, "metainfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests (cached ones included).",
         double(prompt_tokens_));
  single(out, "metainfer_generation_tokens_total", "counter", "Tokens sampled for finished requests.",
         double(generation_tokens_));
  single(out, "metainfer_prefix_cache_queried_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(g.prefix_queried_tokens));
  single(out, "metainfer_prefix_cache_hit_tokens_total", "counter", "Prompt tokens found in the prefix cache.",
         double(g.prefix_hit_tokens));
  single(out, "metainfer_prefix_cache_hit_rate", "gauge", "Prefix cache hit tokens / queried tokens since start.",
         g.prefix_queried_tokens > 0 ? double(g.prefix_hit_tokens) / double(g.prefix_queried_tokens) : 0.0);
  single(out, "metainfer_requests_running", "gauge", "Requests being prefilled or decoded.", g.running);
  single(out, "metainfer_requests_waiting", "gauge", "Requests queued, not yet admitted.", g.waiting);
  single(out, "metainfer_kv_cache_usage_ratio", "gauge", "KV cache blocks held by running requests / all blocks.",
         g.kv_blocks_total > 0 ? double(g.kv_blocks_used) / double(g.kv_blocks_total) : 0.0);
  single(out, "metainfer_kv_cache_cached_blocks", "gauge", "Unreferenced KV blocks kept for prefix reuse.",
         double(g.kv_blocks_cached));
  single(out, "metainfer_prefill_forward_tokens_total", "counter", "Prompt tokens run through the model (prefix cache hits not).",
         double(prefill_forward_tokens_));
  single(out, "metainfer_prefill_forward_seconds_total", "counter", "Wall time of the prefill forwards.", prefill_forward_seconds_);
  single(out, "metainfer_decode_steps_total", "counter", "Batched decode passes.", double(decode_steps_));
  single(out, "metainfer_decode_tokens_total", "counter", "Tokens produced by the decode passes.", double(decode_tokens_));
  single(out, "metainfer_decode_seconds_total", "counter", "Wall time of the decode passes (forward and sampling).",
         decode_seconds_);
  decode_batch_.render(out, "metainfer_decode_batch_size", "Sequences per decode pass.");
  ttft_.render(out, "metainfer_time_to_first_token_seconds", "Arrival to first sampled token.");
  tpot_.render(out, "metainfer_time_per_output_token_seconds", "Per request: (last - first token time) / (tokens - 1).");
  e2e_.render(out, "metainfer_e2e_request_latency_seconds", "Arrival to finish.");
  queue_.render(out, "metainfer_queue_time_seconds", "Arrival to admission.");
  return out;
}

}  // namespace mi::server
