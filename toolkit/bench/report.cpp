#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/bench.h"

namespace mi::bench {
using nlohmann::json;

namespace {

int decimals(double v) {
  const double a = std::fabs(v);
  return a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
}

std::string fixed(double v, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", d, v);
  return buf;
}

std::string percent(const json& fraction) {
  if (!fraction.is_number()) return "—";
  const double p = fraction.get<double>() * 100;
  return fixed(p, p >= 10 ? 1 : p >= 1 ? 2 : 3) + " %";
}

std::string num(const json& v) { return v.is_number() ? format_number(v.get<double>()) : "—"; }

std::string mib(double bytes) { return format_number(bytes / (1024.0 * 1024.0)) + " MiB"; }

std::string threads(const json& n) { return std::to_string(n.get<int>()) + (n.get<int>() == 1 ? " thread" : " threads"); }

}  // namespace

std::string format_number(double v) {
  if (!std::isfinite(v)) return "—";
  return fixed(v, decimals(v));
}

std::string format_stat(const json& stat) {
  if (!stat.is_object()) return "—";
  const double mean = stat["mean"].get<double>(), sd = stat["stddev"].get<double>();
  const int d = decimals(mean);
  if (stat.value("n", 0) < 2) return fixed(mean, d);  // one run: no spread to show
  return fixed(mean, d) + " ± " + fixed(sd, d);
}

std::string to_markdown(const json& r) {
  std::ostringstream md;
  const json& e = r["engine"];
  const json& m = r["model"];
  const json& s = r["settings"];
  const json& l = r["limits"];
  md << "# metainfer bench: " << e["name"].get<std::string>() << "\n\n";
  md << "- engine: `" << e["dir"].get<std::string>() << "` (kernel level " << e["kernel_level"].get<std::string>()
     << ", max_context " << e["max_context"] << ", verification: " << e["verification"].get<std::string>() << ")\n";
  md << "- model: `" << m["path"].get<std::string>() << "` (" << m["architecture"].get<std::string>() << ", "
     << m["dtype"].get<std::string>() << ", " << format_number(m["params"].get<double>() / 1e6) << " M parameters, "
     << mib(m["weight_bytes"].get<double>()) << " of weights; read per decode token "
     << mib(m["decode_weight_bytes_per_token"].get<double>()) << " + " << format_number(m["kv_bytes_per_position"].get<double>() / 1024.0)
     << " KiB of KV per context position)\n";
  md << "- machine: " << r["machine"]["cpu"].get<std::string>() << ", " << r["machine"]["allowed_cpus"] << " CPUs allowed; engine threads "
     << s["threads"] << "\n";
  md << "- workload: matrix `" << s["matrix"].get<std::string>() << "`, " << s["runs"] << " measured run(s) per cell after "
     << s["warmup"] << " warm-up run(s); mean ± sample stddev\n";
  if (r.value("ttft_origin", "") == "prompt_start_mark") {
    const json& loads = r["startup_ms"]["load_samples"];
    const double best_load = loads.empty() ? 0.0 : std::min_element(loads.begin(), loads.end())->get<double>();
    md << "- TTFT and latency count from each run's prompt-start mark (the engine's '@' once its model is loaded; best "
       << format_number(best_load) << " ms after the fork over " << loads.size()
       << " runs of a 1-token prompt): no figure includes start-up\n\n";
  } else {
    md << "- start-up (subtracted from TTFT and latency; the engine has no prompt-start mark): "
       << format_number(r["startup_ms"]["best"].get<double>()) << " ms, the best first-token time of "
       << r["startup_ms"]["samples"].size() << " runs of a 1-token prompt\n\n";
  }

  md << "## Machine limits (measured by the harness)\n\n| limit | value | how |\n|---|---:|---|\n";
  const json& bw = l["read_bandwidth"];
  md << "| read bandwidth (DRAM) | " << format_number(bw["best_gbs"].get<double>()) << " GB/s | best of "
     << bw["samples"].size() << " (pattern, threads) points on " << mib(bw["bytes"].get<double>()) << ", " << bw["isa"].get<std::string>()
     << " loads; best: " << bw["best_pattern"].get<std::string>() << " at " << threads(bw["best_threads"]) << " |\n";
  if (l["working_set_bandwidth"].is_object()) {
    const json& ws = l["working_set_bandwidth"];
    md << "| read bandwidth (model working set) | " << format_number(ws["best_gbs"].get<double>()) << " GB/s | the same probe on "
       << mib(ws["bytes"].get<double>()) << "; best: " << ws["best_pattern"].get<std::string>() << " at " << threads(ws["best_threads"]) << " |\n";
  }
  md << "| decode bandwidth bound | " << format_number(l["decode_bandwidth_gbs"].get<double>()) << " GB/s | the larger of the two, at the start (each cell is judged by the probes around it: the matrix's bound GB/s) |\n";
  for (const char* f : {"f32_fma", "bf16_dot", "bf16_tile"}) {
    const json& p = l["peak_gflops"][f];
    if (p.is_null()) {
      md << "| " << f << " peak | — | not present on this CPU |\n";
      continue;
    }
    md << "| " << f << " peak | " << format_number(p["gflops"].get<double>()) << " GFLOP/s | " << threads(p["threads"]) << ", "
       << p["isa"].get<std::string>() << " (1 thread: " << format_number(p["gflops_1_thread"].get<double>()) << ") |\n";
  }
  const json& pp = l["prefill_peak"];
  md << "| prefill FLOP/s bound | " << format_number(pp["gflops"].get<double>()) << " GFLOP/s | "
     << pp["format"].get<std::string>() << " for " << m["dtype"].get<std::string>() << " weights";
  if (pp.contains("measurements"))
    md << "; the largest of " << pp["measurements"].get<int>() << " measurements (at the start and after every cell; "
       << format_number(pp["gflops_at_start"].get<double>()) << " at the start)";
  md << " |\n\n";

  md << "## Workload matrix\n\n";
  md << "Decode bound = the read bandwidth measured around the cell (the larger of the probes just before and just after "
        "it: `bound GB/s`) ÷ the bytes read per token.\n\n";
  md << "| prompt | gen | TTFT ms | TPOT ms | latency ms | e2e tok/s | decode tok/s | prefill tok/s | peak RSS MiB | bound GB/s "
        "| decode bound tok/s | decode % of bound | prefill bound tok/s | prefill % of bound |\n";
  md << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  bool any_skipped = false, any_baseline = false;
  for (const json& c : r["cells"]) {
    if (c.contains("skipped")) {
      any_skipped = true;
      continue;
    }
    any_baseline = any_baseline || c.contains("baseline");
    const json& x = c["metrics"];
    md << "| " << c["prompt_tokens"] << " | " << c["gen_tokens"] << " | " << format_stat(x["ttft_ms"]) << " | " << format_stat(x["tpot_ms"])
       << " | " << format_stat(x["latency_ms"]) << " | " << format_stat(x["e2e_tok_s"]) << " | " << format_stat(x["decode_tok_s"]) << " | "
       << format_stat(x["prefill_tok_s"]) << " | " << format_stat(x["peak_rss_mb"]) << " | "
       << (c.contains("bandwidth_gbs") ? num(c["bandwidth_gbs"]["bound"]) : std::string("—")) << " | " << num(c["bounds"]["decode_tok_s"]) << " | "
       << percent(c["fraction_of_bound"]["decode"]) << " | " << num(c["bounds"]["prefill_tok_s"]) << " | "
       << percent(c["fraction_of_bound"]["prefill"]) << " |\n";
  }
  md << "\n";

  if (any_baseline) {
    md << "## Baseline\n\n`" << s["baseline_cmd"].get<std::string>() << "`, run interleaved with ours (ours, baseline, ours, ...). "
       << "ratio = ours ÷ baseline (above 1 is ours faster for tok/s, slower for ms and MiB). Our TTFT and prefill here are a "
          "fresh process's first prefill; llama-bench times its pp warm (the llama-bench table below compares pp warm with warm).\n\n";
    md << "| prompt | gen | adapter | metric | ours | baseline | ratio |\n|---:|---:|---|---|---:|---:|---:|\n";
    for (const json& c : r["cells"]) {
      if (!c.contains("baseline")) continue;
      const std::string adapter = c["baseline"]["adapter"].is_string() ? c["baseline"]["adapter"].get<std::string>() : "—";
      for (const auto& mi : cell_metrics()) {
        // pp and tg repeat the cell's prefill and decode (the llama-bench table below has its own pp, timed warm)
        if (!c["ratio"].contains(mi.key) || std::string(mi.key) == "pp_tok_s" || std::string(mi.key) == "tg_tok_s") continue;
        md << "| " << c["prompt_tokens"] << " | " << c["gen_tokens"] << " | " << adapter << " | " << mi.label << " | "
           << format_stat(c["metrics"][mi.key]) << " | " << format_stat(c["baseline"]["metrics"][mi.key]) << " | "
           << fixed(c["ratio"][mi.key].get<double>(), 3) << " |\n";
      }
      for (const json& n : c["baseline"]["notes"]) md << "\nNote (p=" << c["prompt_tokens"] << " n=" << c["gen_tokens"] << "): " << n.get<std::string>() << "\n";
    }
    md << "\n";
  }

  md << "## llama-bench style\n\n`pp P` = prompt tokens/s of P tokens prefilled in one engine process after a warm-up prefill of the "
        "same prompt, as llama-bench times its pp (source `warm`; `cold` = the cell (P, shortest generation)'s fresh-process "
        "TTFT, shown in the last column, used when the warm figure could not be measured); a pp ratio is warm against a "
        "llama-bench baseline (timed warm too) and cold against a command printing our field names (`ratio_basis`); "
        "`tg N` = generated tokens/s of the cell (shortest prompt, N), measured after that prompt (llama-bench's tg starts "
        "from an empty context).\n\n";
  md << "| test | t/s | bound t/s | % of bound |" << (any_baseline ? " baseline t/s | ratio |" : "") << " source | cold-process t/s |\n|---|---:|---:|---:|"
     << (any_baseline ? "---:|---:|" : "") << "---|---:|\n";
  for (const json& row : r["llama_bench"]) {
    md << "| " << row["test"].get<std::string>() << " | " << format_stat(row["tok_s"]) << " | " << num(row["bound_tok_s"]) << " | "
       << percent(row["fraction_of_bound"]) << " |";
    if (any_baseline) md << " " << format_stat(row.value("baseline_tok_s", json(nullptr))) << " | " << num(row.value("ratio", json(nullptr))) << " |";
    md << " " << row.value("source", std::string("—")) << " | " << (row.contains("cold_tok_s") ? format_stat(row["cold_tok_s"]) : std::string("—"))
       << " |\n";
  }
  md << "\n## Supplementary runs\n\n";
  const json& sup = r["supplementary"];
  if (sup["chunked_prefill"].is_object()) {
    md << "### Chunked prefill (prompt " << sup["chunked_prefill"]["prompt_tokens"] << ", 1 new token)\n\n"
       << "| chunk | TTFT ms | prefill tok/s | peak RSS MiB |\n|---|---:|---:|---:|\n";
    for (const json& row : sup["chunked_prefill"]["rows"])
      md << "| " << row["label"].get<std::string>() << " | " << format_stat(row["metrics"]["ttft_ms"]) << " | "
         << format_stat(row["metrics"]["prefill_tok_s"]) << " | " << format_stat(row["metrics"]["peak_rss_mb"]) << " |\n";
    md << "\n";
  }
  const json& batch = sup.value("batch_scaling", json(nullptr));
  if (batch.is_object() && batch.value("available", false)) {
    md << "### Batch scaling (B sequences decoding together, prompt " << batch["prompt_tokens"] << ", " << batch["gen_tokens"]
       << " decode steps)\n\n| B | aggregate tok/s | per-sequence tok/s | step ms | CPU share | speedup vs B = 1 | best-run speedup |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const json& row : batch["rows"])
      md << "| " << row["batch"] << " | " << format_stat(row["metrics"]["aggregate_tok_s"]) << " | "
         << format_stat(row["metrics"]["per_sequence_tok_s"]) << " | " << format_stat(row["metrics"]["step_ms"]) << " | "
         << format_stat(row["metrics"]["cpu_share"]) << " | " << num(row["speedup"]) << " | " << num(row.value("speedup_best", json(nullptr)))
         << " |\n";
    md << "\n";
  } else if (batch.is_object()) {
    md << "### Batch scaling\n\n" << batch.value("reason", std::string("not available")) << "\n\n";
  }
  if (r.contains("profile") && r["profile"].is_object()) {
    const json& prof = r["profile"];
    for (const char* phase : {"decode", "prefill"}) {
      const json& t = prof[phase];
      md << "### Profile: " << (std::string(phase) == "decode" ? "one decode step" : "prefill") << " (prompt " << prof["prompt_tokens"]
         << "; wall " << num(t["wall_ms"]) << " ms, outside ops " << num(t["unattributed_ms"]) << " ms)\n\n"
         << "| op | ms | share | GB/s | GFLOP/s | bound | % of bound | lost ms |\n|---|---:|---:|---:|---:|---|---:|---:|\n";
      for (const json& op : t["ops"])
        md << "| " << op["op"].get<std::string>() << " | " << num(op["ms"]) << " | " << percent(op["share"]) << " | " << num(op["gbs"])
           << " | " << num(op["gflops"]) << " | " << (op["bound"].is_string() ? op["bound"].get<std::string>() : "-") << " | "
           << percent(op["fraction_of_bound"]) << " | " << num(op["lost_ms"]) << " |\n";
      md << "\n";
    }
  }

  if (any_skipped) {
    md << "## Skipped cells\n\n";
    for (const json& c : r["cells"])
      if (c.contains("skipped")) md << "- p=" << c["prompt_tokens"] << " n=" << c["gen_tokens"] << ": " << c["skipped"].get<std::string>() << "\n";
    md << "\n";
  }
  if (!r["errors"].empty()) {
    md << "## Errors\n\n";
    for (const json& err : r["errors"])
      md << "- " << err["cell"].get<std::string>() << " (" << err["who"].get<std::string>() << "): " << err["error"].get<std::string>() << "\n";
    md << "\n";
  }
  return md.str();
}

}  // namespace mi::bench
