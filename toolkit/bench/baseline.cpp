#include "bench/baseline.h"

#include <cctype>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "process/subprocess.h"

namespace mi::bench {
using nlohmann::json;

namespace {

// pp and prefill, tg and decode are the same measurements under two names (README "Benchmarks"): a baseline that
// gives one gets the other, so every ratio that can be formed is.
void mirror(std::map<std::string, double>& m, const char* a, const char* b) {
  if (m.count(a) && !m.count(b)) m[b] = m[a];
  if (m.count(b) && !m.count(a)) m[a] = m[b];
}

double number(const json& j, const char* key, double fallback = -1) {
  if (!j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<double>();
}

// The JSON values in `out`: the whole text as one JSON value, else one per non-blank line (JSON lines).
std::vector<json> json_values(const std::string& out) {
  try {
    return {json::parse(out)};
  } catch (const json::parse_error&) {
  }
  std::vector<json> values;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || (line[first] != '{' && line[first] != '[')) continue;
    try {
      values.push_back(json::parse(line));
    } catch (const json::parse_error&) {
    }
  }
  return values;
}

bool is_llama_bench_test(const json& j) {
  return j.is_object() && j.contains("n_prompt") && j.contains("n_gen") && j.contains("avg_ts");
}

void llama_bench(const std::vector<json>& tests, const Cell& cell, BaselineSample& s) {
  s.adapter = "llama-bench";
  const json *pp = nullptr, *tg = nullptr, *pg = nullptr;
  auto pick = [](const json*& slot, const json& t, bool matches) {
    if (!slot || (matches && !slot->value("_matches", false))) slot = &t;
  };
  std::vector<json> marked;
  marked.reserve(tests.size());
  for (const json& t : tests) {
    json m = t;
    const double np = number(t, "n_prompt", 0), ng = number(t, "n_gen", 0);
    m["_matches"] = (ng == 0 && np == cell.prompt_tokens) || (np == 0 && ng == cell.gen_tokens) ||
                    (np == cell.prompt_tokens && ng == cell.gen_tokens);
    marked.push_back(std::move(m));
  }
  for (const json& t : marked) {
    const double np = number(t, "n_prompt", 0), ng = number(t, "n_gen", 0);
    if (np > 0 && ng == 0) pick(pp, t, t["_matches"]);
    else if (np == 0 && ng > 0) pick(tg, t, t["_matches"]);
    else if (np > 0 && ng > 0) pick(pg, t, t["_matches"]);
  }
  auto take = [&](const json* t, const char* metric, const char* label) {
    if (!t) return;
    s.metrics[metric] = number(*t, "avg_ts");
    if (t->contains("stddev_ts")) s.reported_stddev[metric] = number(*t, "stddev_ts", 0);
    if (!(*t)["_matches"].get<bool>())
      s.notes.push_back(std::string("llama-bench ") + label + " test has n_prompt " + std::to_string(int(number(*t, "n_prompt", 0))) +
                        ", n_gen " + std::to_string(int(number(*t, "n_gen", 0))) + ", not the cell's lengths");
    if (number(*t, "n_depth", 0) > 0)
      s.notes.push_back(std::string("llama-bench ") + label + " test ran at depth " + std::to_string(int(number(*t, "n_depth", 0))));
  };
  take(pp, "pp_tok_s", "pp");
  take(tg, "tg_tok_s", "tg");
  take(pg, "pg_tok_s", "pg");
  if (!pp && !tg && !pg) s.error = "llama-bench output holds no pp, tg or pg test";
}

}  // namespace

const std::vector<std::string>& baseline_field_names() {
  static const std::vector<std::string> names = {"ttft_ms",       "tpot_ms",  "latency_ms", "e2e_tok_s",  "decode_tok_s",
                                                 "prefill_tok_s", "pp_tok_s", "tg_tok_s",   "peak_rss_mb"};
  return names;
}

std::string expand_baseline_command(const std::string& command, const Cell& cell, int threads, const std::string& model) {
  const std::map<std::string, std::string> values = {{"prompt_tokens", std::to_string(cell.prompt_tokens)},
                                                     {"gen_tokens", std::to_string(cell.gen_tokens)},
                                                     {"threads", std::to_string(threads)},
                                                     {"model", model}};
  std::string out;
  for (std::size_t i = 0; i < command.size();) {
    if (command[i] == '{') {
      std::size_t j = i + 1;
      while (j < command.size() && (std::islower(static_cast<unsigned char>(command[j])) || command[j] == '_')) ++j;
      if (j > i + 1 && j < command.size() && command[j] == '}') {
        const std::string name = command.substr(i + 1, j - i - 1);
        const auto it = values.find(name);
        if (it == values.end())
          fail("--baseline-cmd: unknown placeholder {", name, "} (known: {prompt_tokens} {gen_tokens} {threads} {model})");
        out += it->second;
        i = j + 1;
        continue;
      }
    }
    out += command[i++];
  }
  return out;
}

BaselineSample parse_baseline_output(const std::string& out, const Cell& cell) {
  BaselineSample s;
  const std::vector<json> values = json_values(out);
  std::vector<json> tests;
  const json* fields = nullptr;
  for (const json& v : values) {
    if (v.is_array()) {
      for (const json& t : v)
        if (is_llama_bench_test(t)) tests.push_back(t);
    } else if (is_llama_bench_test(v)) {
      tests.push_back(v);
    } else if (v.is_object()) {
      fields = &v;  // the last object wins (a command may print progress objects first)
    }
  }
  if (!tests.empty()) {
    llama_bench(tests, cell, s);
  } else if (fields) {
    s.adapter = "fields";
    for (const std::string& name : baseline_field_names())
      if (fields->contains(name) && (*fields)[name].is_number()) s.metrics[name] = (*fields)[name].get<double>();
    if (s.metrics.empty())
      s.error = "the baseline's JSON object has none of the fields " + json(baseline_field_names()).dump();
  } else {
    s.error = "the baseline printed neither llama-bench JSON nor a JSON object with metainfer's field names: " +
              process::tail(out, 300);
  }
  for (auto& [k, v] : s.metrics)
    if (!std::isfinite(v) || v < 0) s.error = "the baseline's " + k + " is not a finite non-negative number";
  mirror(s.metrics, "pp_tok_s", "prefill_tok_s");
  mirror(s.metrics, "tg_tok_s", "decode_tok_s");
  return s;
}

BaselineSample run_baseline(const std::string& command, const Cell& cell, int threads, const std::string& model,
                            double timeout_s) {
  const std::string expanded = expand_baseline_command(command, cell, threads, model);
  process::RunOptions options;
  options.timeout_s = timeout_s;
  const process::RunResult r = process::run({"/bin/sh", "-c", expanded}, options);
  BaselineSample s;
  if (r.timed_out) {
    s.error = "the baseline command timed out after " + std::to_string(int(timeout_s)) + " s: " + expanded;
  } else if (r.exit_code != 0) {
    s.error = "the baseline command exited with status " + std::to_string(r.exit_code) + ": " + expanded + ": " +
              process::tail(r.err + r.out, 400);
  } else {
    s = parse_baseline_output(r.out, cell);
    if (!s.metrics.count("peak_rss_mb") && s.error.empty()) s.metrics["peak_rss_mb"] = double(r.peak_rss_kb) / 1024.0;
  }
  s.wall_s = r.wall_s;
  return s;
}

}  // namespace mi::bench
