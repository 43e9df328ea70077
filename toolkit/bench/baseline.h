// `--baseline-cmd CMD`: another engine's command, run per cell through /bin/sh, interleaved with ours, its stdout
// read by one of two adapters:
//   llama-bench   a JSON array (`llama-bench -o json`) or JSON lines (`-o jsonl`) of test objects with n_prompt,
//                 n_gen, avg_ts, stddev_ts (and more, ignored): a test with n_gen 0 is "pp n_prompt" (prompt
//                 tokens/s), one with n_prompt 0 is "tg n_gen" (generated tokens/s), one with both is "pg"
//                 ((n_prompt + n_gen) / time). The test matching the cell's lengths is used, else the first of its
//                 kind (with a note).
//   fields        one JSON object with any of our own metric names (ttft_ms, tpot_ms, latency_ms, e2e_tok_s,
//                 decode_tok_s, prefill_tok_s, pp_tok_s, tg_tok_s, peak_rss_mb).
// Placeholders in CMD: {prompt_tokens} {gen_tokens} {threads} {model}; any other {name} is an error. The peak RSS
// of the command (wait4, the shell and what it ran) is recorded when the output does not give peak_rss_mb.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/workload.h"

namespace mi::bench {

struct BaselineSample {
  std::string adapter;                    // "llama-bench" | "fields"
  std::map<std::string, double> metrics;  // our metric names
  std::map<std::string, double> reported_stddev;  // llama-bench's own stddev_ts per metric (its repetitions)
  std::vector<std::string> notes;
  std::string error;                      // empty when the command ran and its output was understood
  double wall_s = 0;
};

// The metric names a "fields" object may carry.
const std::vector<std::string>& baseline_field_names();

// CMD with the placeholders replaced; mi::Error naming an unknown placeholder.
std::string expand_baseline_command(const std::string& command, const Cell& cell, int threads, const std::string& model);

// Parses a baseline's stdout for `cell`; sets error when it is neither adapter's shape.
BaselineSample parse_baseline_output(const std::string& out, const Cell& cell);

// Runs the expanded command with /bin/sh -c and parses its output.
BaselineSample run_baseline(const std::string& command, const Cell& cell, int threads, const std::string& model,
                            double timeout_s);

}  // namespace mi::bench
