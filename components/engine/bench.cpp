// `ENGINE bench`'s model-independent half (engine/bench.h): the matrices, the checked plan, the process metrics and
// the report built from what the model-driving loops measured. Compiled once into engine_core, so an engine's model
// translation unit holds only the loops.
#include "engine/bench.h"

#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/bench_stats.h"

namespace mi::engine {

namespace bench_detail {

double cpu_seconds() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::vector<int32_t> prompt_ids(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> ids(std::size_t(std::max(n, 0)));
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& id : ids) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;  // xorshift64*
    id = int32_t(1 + (x * 0x2545F4914F6CDD1Dull >> 33) % uint64_t(std::max(vocab - 1, 1)));
  }
  return ids;
}

void PeakRss::reset() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  resettable_ = bool(f);
}

double PeakRss::mib() const {
  if (resettable_) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

const char* PeakRss::source() const {
  return resettable_ ? "VmHWM after a reset per run (/proc/self/clear_refs)" : "getrusage ru_maxrss (process lifetime maximum)";
}

Matrix matrix_named(const std::string& name) {
  if (name == "paper") return {{11, 256, 1021}, {256, 1024, 2048}, 1021, {128, 256, 512}};
  if (name == "quick") return {{11, 64}, {16, 32}, 64, {16, 32}};
  fail("--matrix: expected paper or quick, got \"", name, "\"");
}

RunMetrics cell_metrics(int prompt, int gen, double first, double last, double peak_rss_mb) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  RunMetrics m;
  m["ttft_ms"] = first * 1e3;
  m["latency_ms"] = last * 1e3;
  m["peak_rss_mb"] = peak_rss_mb;
  m["e2e_tok_s"] = gen / last;
  m["pg_tok_s"] = (prompt + gen) / last;
  m["prefill_tok_s"] = m["pp_tok_s"] = prompt / first;
  if (gen >= 2 && last > first) {
    m["tpot_ms"] = (last - first) / (gen - 1) * 1e3;
    m["decode_tok_s"] = m["tg_tok_s"] = (gen - 1) / (last - first);
  } else {
    m["tpot_ms"] = m["decode_tok_s"] = m["tg_tok_s"] = kNaN;
  }
  return m;
}

std::string run_label(int i, int warmup, int runs) {
  return i < warmup ? "warm-up " + std::to_string(i + 1) + "/" + std::to_string(warmup)
                    : "run " + std::to_string(i - warmup + 1) + "/" + std::to_string(runs);
}

}  // namespace bench_detail

BenchPlan plan_bench(const BenchSettings& s, int max_context) {
  BenchPlan plan;
  plan.mx = bench_detail::matrix_named(s.matrix);
  bench_detail::Matrix& mx = plan.mx;
  if (!s.prompts.empty()) mx.prompts = s.prompts, mx.chunk_prompt = *std::max_element(s.prompts.begin(), s.prompts.end());
  if (!s.gens.empty()) mx.gens = s.gens;
  std::sort(mx.prompts.begin(), mx.prompts.end());
  std::sort(mx.gens.begin(), mx.gens.end());
  if (s.runs < 1) fail("--runs: expected an integer >= 1, got ", s.runs);
  if (s.warmup < 0) fail("--warmup: expected an integer >= 0, got ", s.warmup);
  for (int p : mx.prompts)
    if (p < 1) fail("--prompts: every prompt length must be >= 1, got ", p);
  for (int g : mx.gens)
    if (g < 2) fail("--gens: every generation length must be >= 2 (TPOT needs two tokens), got ", g);
  for (const std::string& part : s.parts)
    if (part != "matrix" && part != "batch" && part != "chunked" && part != "profile")
      fail("--parts: expected a comma-separated subset of matrix,batch,chunked,profile, got \"", part, "\"");
  auto wants = [&](const char* part) { return std::find(s.parts.begin(), s.parts.end(), part) != s.parts.end(); };
  plan.matrix = wants("matrix"), plan.batch = wants("batch"), plan.chunked = wants("chunked");
  plan.profile = s.profile || wants("profile");
  plan.batches = s.batch;
  if (plan.batch && plan.batches.empty()) fail("--batch: give at least one batch size");
  for (int b : plan.batches)
    if (b < 1) fail("--batch: every batch size must be >= 1, got ", b);
  std::sort(plan.batches.begin(), plan.batches.end());
  plan.batches.erase(std::unique(plan.batches.begin(), plan.batches.end()), plan.batches.end());
  const int largest_batch = plan.batches.empty() ? 1 : plan.batches.back();
  if (s.max_batch < 0) fail("--max-batch: expected an integer >= 1, got ", s.max_batch);
  plan.max_batch = s.max_batch > 0 ? s.max_batch : largest_batch;
  if (plan.batch && largest_batch > plan.max_batch)
    fail("--batch: batch size ", largest_batch, " exceeds --max-batch ", plan.max_batch);
  if (s.batch_prompt < 0) fail("--batch-prompt: expected an integer >= 1, got ", s.batch_prompt);
  if (s.batch_gen < 0 || (s.batch_gen > 0 && s.batch_gen < 2)) fail("--batch-gen: expected an integer >= 2, got ", s.batch_gen);
  plan.batch_prompt = s.batch_prompt > 0 ? s.batch_prompt : mx.prompts.front();
  // The default decode steps (the shortest generation) are capped by the context the prompt leaves; given ones are not.
  plan.batch_gen = s.batch_gen > 0 ? s.batch_gen : std::max(2, std::min(mx.gens.front(), max_context - plan.batch_prompt));
  if (plan.batch && plan.batch_prompt + plan.batch_gen > max_context)
    fail("--batch-prompt ", plan.batch_prompt, " + --batch-gen ", plan.batch_gen, " exceeds the engine's max_context of ",
         max_context);
  if (plan.profile && (s.profile_prompt < 1 || s.profile_prompt + 1 > max_context))
    fail("--profile-prompt: expected 1..", max_context - 1, " (max_context - 1), got ", s.profile_prompt);
  if (s.bandwidth_gbs < 0) fail("--bandwidth-gbs: expected a number > 0, got ", s.bandwidth_gbs);
  if (s.peak_gflops < 0) fail("--peak-gflops: expected a number > 0, got ", s.peak_gflops);

  return plan;
}

namespace {

using nlohmann::ordered_json;
using bench_detail::RunMetrics;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ordered_json stats_json(const std::vector<RunMetrics>& runs, const std::vector<std::string>& keys) {
  ordered_json out = ordered_json::object();
  for (const std::string& k : keys) {
    std::vector<double> v;
    for (const auto& r : runs)
      if (r.count(k)) v.push_back(r.at(k));
    out[k] = summarize_runs(v).to_json();
  }
  return out;
}

const std::vector<std::string>& cell_keys() {
  static const std::vector<std::string> k = {"ttft_ms",       "tpot_ms",  "latency_ms", "e2e_tok_s", "decode_tok_s",
                                             "prefill_tok_s", "pp_tok_s", "tg_tok_s",   "pg_tok_s",  "peak_rss_mb"};
  return k;
}

// The matrix's cells and the llama-bench rows read off them (pp of each prompt, tg of each generation: the first
// measured cell with it).
void matrix_json(const BenchMeasurements& m, const bench_detail::Matrix& mx, int max_context, ordered_json& cells,
                 ordered_json& llama_rows) {
  for (const BenchMeasurements::Cell& c : m.cells) {
    const int p = c.prompt, g = c.gen;
    ordered_json cr = {{"prompt_tokens", p}, {"gen_tokens", g}};
    if (c.skipped) {
      cr["skipped"] = "prompt + generated tokens = " + std::to_string(p + g) + " exceeds the engine's max_context of " +
                      std::to_string(max_context);
      cells.push_back(cr);
      continue;
    }
    ordered_json run_log = ordered_json::array();
    for (const RunMetrics& r : c.runs)
      run_log.push_back({{"ttft_ms", r.at("ttft_ms")}, {"latency_ms", r.at("latency_ms")}, {"tokens", g},
                         {"peak_rss_mb", r.at("peak_rss_mb")}});
    cr["pp_test"] = "pp " + std::to_string(p);
    cr["tg_test"] = "tg " + std::to_string(g);
    cr["error"] = nullptr;
    cr["metrics"] = stats_json(c.runs, cell_keys());
    cr["runs"] = run_log;
    cells.push_back(cr);
  }
  if (m.cells.empty()) return;
  auto find = [&](int p, int g) -> const ordered_json* {
    for (const auto& c : cells)
      if (c["prompt_tokens"] == p && c["gen_tokens"] == g && !c.contains("skipped")) return &c;
    return nullptr;
  };
  for (int p : mx.prompts) {
    const ordered_json* c = nullptr;
    for (int g : mx.gens)
      if (!c) c = find(p, g);
    if (c) llama_rows.push_back({{"test", "pp " + std::to_string(p)}, {"cell", {p, (*c)["gen_tokens"]}}, {"tok_s", (*c)["metrics"]["pp_tok_s"]}});
  }
  for (int g : mx.gens) {
    const ordered_json* c = nullptr;
    for (int p : mx.prompts)
      if (!c) c = find(p, g);
    if (c) llama_rows.push_back({{"test", "tg " + std::to_string(g)}, {"cell", {(*c)["prompt_tokens"], g}}, {"tok_s", (*c)["metrics"]["tg_tok_s"]}});
  }
}

ordered_json chunked_json(const BenchMeasurements& m, int max_step) {
  ordered_json rows = ordered_json::array();
  for (const BenchMeasurements::ChunkRow& row : m.chunk_rows) {
    const int chunk = row.chunk;
    const std::string name = chunk == 0 ? "none" : std::to_string(chunk);
    rows.push_back({{"chunk", chunk}, {"label", chunk == 0 && max_step < m.chunked_prompt ? "none (capped at " + std::to_string(max_step) + ")" : name},
                    {"metrics", stats_json(row.runs, {"ttft_ms", "prefill_tok_s", "peak_rss_mb"})}, {"error", nullptr}});
  }
  return {{"prompt_tokens", m.chunked_prompt}, {"rows", rows},
          {"note", "the scratch is sized once at start-up for the engine's largest step, so peak RSS "
                   "does not shrink with a smaller chunk in this process"}};
}

// speedup: of the mean aggregate rates; speedup_best: of the best runs (the least disturbed on a shared machine).
ordered_json batch_rows_json(const BenchMeasurements& m, const std::vector<int>& batches) {
  ordered_json rows = ordered_json::array();
  double base = kNaN, base_best = kNaN;
  for (std::size_t bi = 0; bi < batches.size(); ++bi) {
    const ordered_json metrics = stats_json(m.batch_runs[bi], {"aggregate_tok_s", "per_sequence_tok_s", "step_ms", "cpu_share"});
    const double aggregate = metrics["aggregate_tok_s"].is_object() ? metrics["aggregate_tok_s"]["mean"].get<double>() : kNaN;
    double best = kNaN;
    for (const auto& r : m.batch_runs[bi]) best = std::isnan(best) ? r.at("aggregate_tok_s") : std::max(best, r.at("aggregate_tok_s"));
    if (batches[bi] == 1) base = aggregate, base_best = best;
    auto ratio = [](double a, double b) { return std::isfinite(a) && std::isfinite(b) && b > 0 ? ordered_json(a / b) : ordered_json(nullptr); };
    rows.push_back({{"batch", batches[bi]}, {"metrics", metrics}, {"best_aggregate_tok_s", std::isfinite(best) ? ordered_json(best) : ordered_json(nullptr)},
                    {"speedup", ratio(aggregate, base)}, {"speedup_best", ratio(best, base_best)}});
  }
  return rows;
}

}  // namespace

ordered_json bench_report(const BenchSettings& s, const BenchPlan& plan, const OpCostModel& cost, int max_context,
                          int max_step, int threads, const BenchMeasurements& m) {
  const bench_detail::Matrix& mx = plan.mx;
  ordered_json report;
  report["format"] = "metainfer-bench/1";
  report["source"] = "engine";
  ordered_json cells = ordered_json::array(), llama_rows = ordered_json::array(), supplementary = ordered_json::object();
  matrix_json(m, mx, max_context, cells, llama_rows);
  if (m.chunked) supplementary["chunked_prefill"] = chunked_json(m, max_step);
  if (m.profile) report["profile"] = profile_report(*m.profile, cost);
  if (m.batch_unavailable)
    supplementary["batch_scaling"] = {
        {"available", false},
        {"batch_sizes", plan.batches},
        {"reason", "not available: this engine was generated with runtime.max_batch = 1, so it has no batched decode "
                   "path (forward_batch); regenerate with max_batch >= 2 to measure batch scaling"}};
  if (m.batch_measured) {
    const ordered_json rows = batch_rows_json(m, plan.batches);
    if (m.profile_batch) report["profile_batch"] = profile_report(*m.profile_batch, cost);
    supplementary["batch_scaling"] = {{"available", true}, {"batch_sizes", plan.batches}, {"prompt_tokens", plan.batch_prompt},
                                      {"gen_tokens", plan.batch_gen}, {"max_batch", plan.max_batch}, {"rows", rows}};
  }
  report["settings"] = {{"matrix", s.matrix}, {"prompts", mx.prompts}, {"gens", mx.gens}, {"runs", s.runs},
                        {"warmup", s.warmup}, {"threads", threads},  {"parts", s.parts}, {"peak_rss_source", m.peak_rss_source}};
  report["cells"] = cells;
  report["llama_bench"] = llama_rows;
  report["supplementary"] = supplementary;
  report["errors"] = ordered_json::array();
  report["elapsed_s"] = m.elapsed_s;
  return report;
}

}  // namespace mi::engine
