#include "servebench/serving_report.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "servebench/percentiles.h"

namespace mi::servebench {
namespace {

constexpr double kMs = 1000.0;

std::string fmt(const nlohmann::json& v, int decimals = 2) {
  if (!v.is_number()) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v.get<double>());
  return buf;
}

std::string shortest(const nlohmann::json& v) {
  if (!v.is_number()) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v.get<double>());
  return buf;
}

std::string escape_cell(std::string s) {
  for (char& c : s)
    if (c == '|' || c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

nlohmann::json level_report(const LevelRun& run) {
  std::vector<double> ttft, tpot, itl, e2e;
  long long output_tokens = 0, prompt_tokens = 0;
  int completed = 0, from_usage = 0, from_chunks = 0, with_prompt_usage = 0;
  std::map<std::string, int> errors;
  std::vector<std::string> error_order;
  for (const RequestResult& r : run.results) {
    if (!r.ok) {
      if (errors[r.error]++ == 0) error_order.push_back(r.error);
      continue;
    }
    ++completed;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.latency_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (const auto t = r.tpot_s()) tpot.push_back(*t);
    output_tokens += r.output_tokens();
    (r.output_tokens_from_usage() ? from_usage : from_chunks)++;
    if (r.usage_prompt_tokens) {
      prompt_tokens += *r.usage_prompt_tokens;
      ++with_prompt_usage;
    }
  }
  nlohmann::json j;
  j["concurrency"] = run.concurrency;
  j["requests_planned"] = run.requests_planned;
  j["requests_sent"] = run.requests_sent;
  j["completed"] = completed;
  j["failed"] = run.requests_sent - completed;
  j["not_sent"] = run.requests_planned - run.requests_sent;
  j["deadline_reached"] = run.deadline_reached;
  j["duration_s"] = run.duration_s;
  const bool timed = run.duration_s > 0;
  j["request_throughput_rps"] = timed ? nlohmann::json(completed / run.duration_s) : nlohmann::json(nullptr);
  j["output_token_throughput_tps"] = timed ? nlohmann::json(double(output_tokens) / run.duration_s) : nlohmann::json(nullptr);
  j["total_output_tokens"] = output_tokens;
  j["total_prompt_tokens"] = with_prompt_usage == completed && completed > 0 ? nlohmann::json(prompt_tokens) : nlohmann::json(nullptr);
  j["output_tokens_source"] = completed == 0        ? nlohmann::json(nullptr)
                              : from_chunks == 0    ? nlohmann::json("usage")
                              : from_usage == 0     ? nlohmann::json("content_chunks")
                                                    : nlohmann::json("mixed");
  j["requests_without_usage"] = from_chunks;
  j["ttft_ms"] = to_json(summarize(ttft), kMs);
  j["tpot_ms"] = to_json(summarize(tpot), kMs);
  j["itl_ms"] = to_json(summarize(itl), kMs);
  j["e2e_ms"] = to_json(summarize(e2e), kMs);
  j["server"] = run.server;
  j["errors"] = nlohmann::json::array();
  for (const std::string& e : error_order) j["errors"].push_back({{"message", e}, {"count", errors[e]}});
  j["first_error"] = error_order.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_order.front());
  return j;
}

nlohmann::json make_report(const Workload& w, double deadline_s, const std::vector<LevelRun>& runs) {
  nlohmann::json rep;
  rep["format"] = kReportFormat;
  nlohmann::json s;
  s["url"] = w.url.text;
  s["model"] = w.model;
  s["endpoint"] = endpoint_name(w.endpoint);
  s["path"] = endpoint_path(w.endpoint);
  if (!w.prompt_ids.empty())
    s["prompt"] = {{"kind", "ids"}, {"ids", w.prompt_ids.size()}};
  else
    s["prompt"] = {{"kind", "text"}, {"chars", w.prompt_text.size()},
                   {"words", w.prompt_words > 0 ? nlohmann::json(w.prompt_words) : nlohmann::json(nullptr)}};
  s["max_tokens"] = w.max_tokens;
  s["temperature"] = 0;
  s["timeout_s"] = w.timeout_s;
  s["deadline_s"] = deadline_s;
  s["concurrency"] = nlohmann::json::array();
  for (const LevelRun& r : runs) s["concurrency"].push_back(r.concurrency);
  rep["settings"] = s;
  rep["levels"] = nlohmann::json::array();
  int failed = 0, without_usage = 0;
  bool deadline = false;
  for (const LevelRun& r : runs) {
    nlohmann::json l = level_report(r);
    failed += l["failed"].get<int>();
    without_usage += l["requests_without_usage"].get<int>();
    deadline = deadline || r.deadline_reached;
    rep["levels"].push_back(std::move(l));
  }
  rep["failed_requests"] = failed;
  rep["deadline_reached"] = deadline;
  rep["notes"] = nlohmann::json::array();
  if (without_usage > 0)
    rep["notes"].push_back(std::to_string(without_usage) +
                           " completed request(s) had no usage.completion_tokens chunk: their output tokens are the number of "
                           "content chunks (one token per chunk assumed), which TPOT and output throughput then use");
  if (deadline) rep["notes"].push_back("the global deadline (--deadline-s) stopped the run: see not_sent and the errors");
  return rep;
}

std::string to_markdown(const nlohmann::json& rep) {
  std::ostringstream out;
  const nlohmann::json& s = rep["settings"];
  const nlohmann::json& p = s["prompt"];
  out << "## serve-bench: " << s["url"].get<std::string>() << " `" << s["model"].get<std::string>() << "`\n\n";
  out << "Endpoint " << s["path"].get<std::string>() << ", prompt "
      << (p["kind"] == "ids"        ? std::to_string(p["ids"].get<int>()) + " token ids"
          : p["words"].is_number() ? "of " + std::to_string(p["words"].get<int>()) + " words (" + std::to_string(p["chars"].get<int>()) + " chars)"
                                   : std::to_string(p["chars"].get<int>()) + " chars of text")
      << ", max_tokens " << s["max_tokens"].get<int>() << ", temperature 0, streamed; timeout " << shortest(s["timeout_s"])
      << " s per request, deadline " << shortest(s["deadline_s"]) << " s.\n\n";
  out << "| concurrency | completed | failed | not sent | duration s | req/s | output tok/s | output tokens |\n"
         "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const nlohmann::json& l : rep["levels"])
    out << "| " << l["concurrency"] << " | " << l["completed"] << " | " << l["failed"] << " | " << l["not_sent"] << " | "
        << fmt(l["duration_s"], 3) << " | " << fmt(l["request_throughput_rps"]) << " | " << fmt(l["output_token_throughput_tps"]) << " | "
        << l["total_output_tokens"] << (l["output_tokens_source"] == "usage" || l["output_tokens_source"].is_null() ? "" : " *") << " |\n";
  out << "\nLatency (ms): mean / median / p90 / p99 over completed requests (ITL over every gap of every request).\n\n";
  out << "| concurrency | metric | n | mean | median | p90 | p99 |\n|---:|---|---:|---:|---:|---:|---:|\n";
  for (const nlohmann::json& l : rep["levels"])
    for (const auto& [key, name] : {std::pair{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}, {"itl_ms", "ITL"}, {"e2e_ms", "E2E"}}) {
      const nlohmann::json& m = l[key];
      out << "| " << l["concurrency"] << " | " << name << " | " << m["n"] << " | " << fmt(m["mean"]) << " | " << fmt(m["median"]) << " | "
          << fmt(m["p90"]) << " | " << fmt(m["p99"]) << " |\n";
    }
  bool any_server = false;
  for (const nlohmann::json& l : rep["levels"]) any_server = any_server || l["server"].is_object();
  if (any_server) {
    out << "\nServer-side work during each level (the engine's /metrics counters): decode passes alone, without the "
           "prefill steps that TPOT also includes.\n\n"
           "| concurrency | decode tok/s | mean decode batch | decode passes | decode s | prefill tok/s | prefill tokens |\n"
           "|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const nlohmann::json& l : rep["levels"]) {
      if (!l["server"].is_object()) continue;
      const nlohmann::json& v = l["server"];
      out << "| " << l["concurrency"] << " | " << fmt(v["decode_tok_s"]) << " | " << fmt(v["mean_decode_batch"]) << " | "
          << shortest(v["decode_steps"]) << " | " << fmt(v["decode_s"], 3) << " | " << fmt(v["prefill_tok_s"]) << " | "
          << shortest(v["prefill_tokens"]) << " |\n";
    }
  }
  bool any_errors = false;
  for (const nlohmann::json& l : rep["levels"]) any_errors = any_errors || !l["errors"].empty();
  if (any_errors) {
    out << "\nFailed requests (first error first):\n\n| concurrency | count | error |\n|---:|---:|---|\n";
    for (const nlohmann::json& l : rep["levels"])
      for (const nlohmann::json& e : l["errors"])
        out << "| " << l["concurrency"] << " | " << e["count"] << " | " << escape_cell(e["message"].get<std::string>()) << " |\n";
  }
  if (!rep["notes"].empty()) {
    out << "\n";
    for (const nlohmann::json& n : rep["notes"]) out << "* " << n.get<std::string>() << "\n";
  }
  return out.str();
}

}  // namespace mi::servebench
