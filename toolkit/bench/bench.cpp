#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>

#include "bench/baseline.h"
#include "bench/engine_runner.h"
#include "bench/machine_limits.h"
#include "bench/model_cost.h"
#include "common/error.h"
#include "generator/generator.h"
#include "platform/cpu_info.h"
#include "process/subprocess.h"

namespace mi::bench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Progress on stderr: which cell and run, the time since the measurements began and the time left, estimated from
// the work done so far (each run weighted by its token count).
class Progress {
 public:
  Progress(std::ostream* out, double total_weight) : out_(out), total_(total_weight), start_(Clock::now()) {}
  void line(const std::string& what, double weight) {
    if (out_) {
      const double elapsed = seconds();
      char buf[400];
      if (done_ > 0) {
        const double eta = elapsed * std::max(0.0, total_ - done_) / done_;
        std::snprintf(buf, sizeof buf, "bench: %s | elapsed %.1f s | ETA %.1f s\n", what.c_str(), elapsed, eta);
      } else {
        std::snprintf(buf, sizeof buf, "bench: %s | elapsed %.1f s | ETA -\n", what.c_str(), elapsed);
      }
      *out_ << buf << std::flush;
    }
    pending_ = weight;
  }
  void done() { done_ += pending_, pending_ = 0; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream* out_;
  double total_, done_ = 0, pending_ = 0;
  Clock::time_point start_;
};

double run_weight(int prompt, int gen) { return 2.0 + gen + prompt / 16.0; }

// Where a run's TTFT and latency count from (README "Benchmarks"): its own prompt-start mark, or for an engine
// without one the best first-token time of a 1-token prompt (startup_s).
double run_origin(const EngineRun& r, double startup_s) { return r.prompt_start_s >= 0 ? r.prompt_start_s : startup_s; }

// One run's metrics (README "Benchmarks").
std::map<std::string, double> run_metrics(const EngineRun& r, int prompt, int gen, double startup_s) {
  std::map<std::string, double> m;
  const double first = r.arrivals_s.front(), last = r.arrivals_s.back();
  const int n = int(r.arrivals_s.size());
  const double origin = run_origin(r, startup_s);
  const double ttft_s = std::max(0.0, first - origin);
  const double latency_s = std::max(last - origin, 1e-9);
  m["ttft_ms"] = ttft_s * 1e3;
  m["latency_ms"] = latency_s * 1e3;
  m["peak_rss_mb"] = double(r.peak_rss_kb) / 1024.0;
  m["e2e_tok_s"] = n / latency_s;
  m["pg_tok_s"] = (prompt + n) / latency_s;  // llama-bench's "pg": prompt and generated tokens over the whole time
  // A TTFT at or below zero was lost in start-up noise: no prefill rate from this run.
  m["prefill_tok_s"] = m["pp_tok_s"] = ttft_s > 0 ? prompt / ttft_s : kNaN;
  if (n >= 2 && last > first) {
    m["tpot_ms"] = (last - first) / (n - 1) * 1e3;
    m["decode_tok_s"] = m["tg_tok_s"] = (n - 1) / (last - first);
  } else {
    m["tpot_ms"] = m["decode_tok_s"] = m["tg_tok_s"] = kNaN;
  }
  (void)gen;
  return m;
}

std::string cell_name(const Cell& c) { return "p=" + std::to_string(c.prompt_tokens) + " n=" + std::to_string(c.gen_tokens); }

json stats_of(const std::vector<std::map<std::string, double>>& runs, const std::vector<std::string>& keys) {
  json out = json::object();
  for (const std::string& k : keys) {
    std::vector<double> values;
    for (const auto& r : runs)
      if (r.count(k)) values.push_back(r.at(k));
    out[k] = summarize(values).to_json();
  }
  return out;
}

double mean_of(const json& stats, const std::string& key) {
  if (!stats.contains(key) || stats[key].is_null()) return kNaN;
  return stats[key]["mean"].get<double>();
}

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// `ENGINE bench` in-process (components/engine/bench.h) for what one generate request per process cannot show:
// batch scaling (B sequences decoding together) and the per-op profile. Returns its report, or an error text.
json engine_self_bench(const fs::path& binary, const fs::path& checkpoint, const std::vector<std::string>& args,
                       double timeout_s, std::string& error) {
  std::vector<std::string> argv = {binary.string(), "bench", "--model", checkpoint.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  process::RunOptions ro;
  ro.timeout_s = timeout_s;
  const process::RunResult r = process::run(argv, ro);
  if (r.timed_out || r.exit_code != 0) {
    error = r.command + (r.timed_out ? ": timed out" : ": exit " + std::to_string(r.exit_code)) + ": " + process::tail(r.err, 800);
    return nullptr;
  }
  try {
    return process::last_json_line(r.out);
  } catch (const std::exception& e) {
    error = r.command + ": no JSON report on stdout: " + e.what();
    return nullptr;
  }
}

// llama-bench's `pp P`: the engine's own bench (`ENGINE bench --parts matrix`) prefills P tokens in one process,
// after --warmup unmeasured runs of the same prompt, --runs times, as llama-bench times its pp after a warm-up
// prompt. What a fresh process's first prefill adds on top (touching its KV blocks and scratch for the first time,
// slow where the VM's host must back the pages) stays in the cells' TTFT; the pp row compares like with like.
// Returns {"metrics": {ttft_ms, prefill_tok_s}, ...} or {"available": false, "reason": ...}.
// One process runs max(1, warmup) + runs prefills, so it gets that many times the per-run timeout.
json warm_prefill(const fs::path& binary, const fs::path& checkpoint, int prompt, int runs, int warmup, int threads,
                  double timeout_s, std::string& error) {
  const int warmups = std::max(1, warmup);
  const json r = engine_self_bench(binary, checkpoint, {"--parts", "matrix", "--prompts", std::to_string(prompt), "--gens", "2",
                                   "--runs", std::to_string(runs), "--warmup", std::to_string(warmups),
                                   "--threads", std::to_string(threads)},
                                   timeout_s * (warmups + runs), error);
  if (r.is_object() && r.contains("cells") && r["cells"].is_array())
    for (const json& c : r["cells"]) {
      if (c.value("prompt_tokens", -1) != prompt) continue;
      const json metrics = c.value("metrics", json::object());
      const json rate = metrics.value("prefill_tok_s", json(nullptr));
      if (rate.is_object() && rate.contains("mean") && rate["mean"].is_number()) {
        json ttfts = json::array();  // each run's prefill time, as the engine measured it
        for (const json& run : c.value("runs", json::array())) ttfts.push_back(run.value("ttft_ms", json(nullptr)));
        return {{"available", true},
                {"source", "ENGINE bench --parts matrix (in-process, after " + std::to_string(warmups) +
                               " warm-up prefill(s) of the same prompt)"},
                {"warmup", warmups},
                {"runs", runs},
                {"metrics", {{"ttft_ms", metrics.value("ttft_ms", json(nullptr))}, {"prefill_tok_s", rate}}},
                {"runs_ttft_ms", ttfts}};
      }
      if (error.empty()) error = "the engine's cell for prompt " + std::to_string(prompt) + " has no prefill rate";
    }
  if (error.empty()) error = "the engine's report has no cell for prompt " + std::to_string(prompt);
  return {{"available", false}, {"reason", "not available: " + error}};
}

std::string verification_state(const fs::path& dir) {
  try {
    return json::parse(generator::read_file(dir / "reports" / "verification.json")).value("state", "unknown");
  } catch (const std::exception&) {
    return "not verified";
  }
}

}  // namespace

const std::vector<MetricInfo>& cell_metrics() {
  static const std::vector<MetricInfo> m = {{"ttft_ms", "TTFT ms"},           {"tpot_ms", "TPOT ms"},
                                            {"latency_ms", "latency ms"},     {"e2e_tok_s", "e2e tok/s"},
                                            {"decode_tok_s", "decode tok/s"}, {"prefill_tok_s", "prefill tok/s"},
                                            {"pp_tok_s", "pp tok/s"},         {"tg_tok_s", "tg tok/s"},
                                            {"pg_tok_s", "pg tok/s"},         {"peak_rss_mb", "peak RSS MiB"}};
  return m;
}

json run_bench(const BenchOptions& o) {
  if (o.runs < 1) fail("--runs: expected an integer >= 1, got ", o.runs);
  if (o.warmup < 0) fail("--warmup: expected an integer >= 0, got ", o.warmup);
  if (o.threads < 0) fail("--threads: expected an integer >= 1, got ", o.threads);
  std::error_code ec;
  if (!fs::is_regular_file(o.engine_dir / "MANIFEST.json", ec))
    fail(o.engine_dir.string(), " is not an engine directory (no MANIFEST.json); generate one with `metainfer generate`");
  const generator::Engine engine = generator::load_engine(o.engine_dir);
  const json plan = json::parse(generator::read_file(engine.dir / "plan.json"));
  const fs::path checkpoint = o.model.empty() ? fs::path(engine.manifest.at("constraints").at("model").get<std::string>()) : o.model;
  if (!fs::is_directory(checkpoint, ec)) fail("--model: '", checkpoint.string(), "' is not a directory");
  const ModelCost cost = model_cost(plan, checkpoint);
  const int plan_threads = plan.at("platform").value("threads", 0);
  const int threads = o.threads > 0 ? o.threads : plan_threads > 0 ? plan_threads : std::max(1, platform::detect_cpu().allowed_cpus);
  const int max_context = cost.max_context > 0 ? cost.max_context : plan.at("model").at("dims").value("max_position_embeddings", 0);
  const int compiled_chunk = plan.at("constraints").value("chunked_prefill", 0);
  const int max_step = compiled_chunk > 0 ? std::min(compiled_chunk, max_context) : max_context;

  // Cells that fit the engine's context run; the others are reported as skipped.
  std::vector<Cell> cells, skipped;
  for (const Cell& c : o.matrix.cells()) (c.prompt_tokens + c.gen_tokens <= max_context ? cells : skipped).push_back(c);
  if (cells.empty())
    fail("no cell of the ", o.matrix.name, " matrix fits the engine's max_context of ", max_context,
         " (prompt + generated tokens); use --matrix quick or --prompts/--gens");
  int longest = 0;
  for (const Cell& c : cells) longest = std::max(longest, c.prompt_tokens + c.gen_tokens);
  const bool with_baseline = !o.baseline_cmd.empty();
  if (with_baseline) (void)expand_baseline_command(o.baseline_cmd, cells.front(), threads, checkpoint.string());  // placeholder check
  if (!fs::is_regular_file(engine.binary, ec))
    fail(o.engine_dir.string(), ": the engine is not built (no ", engine.binary.string(), "); run `metainfer verify ",
         o.engine_dir.string(), " --only B0` first");

  json errors = json::array();
  const auto t_all = std::chrono::steady_clock::now();

  // 1. The machine's limits.
  if (o.progress) *o.progress << "bench: measuring the machine's limits (read bandwidth, peak FLOP/s)\n" << std::flush;
  LimitsOptions lo;
  lo.threads = std::max(threads, platform::detect_cpu().allowed_cpus);
  lo.dram_bytes = o.dram_bytes;
  lo.working_set_bytes = cost.decode_working_set(longest);
  MachineLimits limits = measure_machine_limits(lo);
  // The prefill bound is the largest peak measured in the run: the start's, then one after every cell (a peak
  // measured while the host steals cycles is too low, and a bound some code beats is no bound: a cell once read 105%
  // of a start-of-run peak measured at half speed). Cells' prefill fractions are set after the matrix, against it.
  PeakFlops peak = limits.prefill_peak(cost.dtype);
  const double peak_at_start = peak.gflops;
  int peak_measurements = 1;
  // Read bandwidth moves on shared hosts (bimodal on some VMs), so each cell's decode bound is the bandwidth measured
  // around that cell: the larger of a DRAM probe just before it and one just after it (every pattern, at the engine's
  // thread count and at every allowed CPU, the best of 2 passes), never less than a working-set bound. The first
  // cell's "before" is the full probe above.
  const auto frame_probe = [&] {
    platform::BandwidthOptions bo;
    bo.bytes = o.dram_bytes;
    bo.max_threads = lo.threads;
    bo.thread_counts = threads == lo.threads ? std::vector<int>{threads} : std::vector<int>{threads, lo.threads};
    bo.passes = 2;
    return platform::probe_read_bandwidth(bo).best_gbs;
  };
  const double working_set_gbs = limits.working_set ? limits.working_set->best_gbs : 0.0;
  double bandwidth_before = limits.dram.best_gbs;
  double bandwidth_most = limits.decode_bandwidth_gbs();  // the largest decode bandwidth measured in the run: the profile's bound

  EngineRunner runner(engine.binary, checkpoint, threads, cost.vocab, o.timeout_s);

  // The chunked-prefill study: at the matrix's chunk prompt (when it fits), each chunk vs none.
  const int chunk_prompt = std::min(o.matrix.chunk_prompt, max_context - 1);
  std::vector<int> chunks = {0};
  for (int c : o.matrix.prefill_chunks)
    if (c < chunk_prompt && c <= max_step) chunks.push_back(c);
  const bool chunk_study = o.supplementary && chunk_prompt >= 2;

  const int startup_runs = std::max(5, o.runs);
  double total = (o.warmup + startup_runs) * run_weight(1, 1);
  for (const Cell& c : cells)
    total += (o.warmup + o.runs) * run_weight(c.prompt_tokens, c.gen_tokens) * (with_baseline ? 2 : 1);
  if (chunk_study) total += chunks.size() * (o.warmup + o.runs) * run_weight(chunk_prompt, 1);
  std::vector<int> warm_prompts;  // each prompt length's warm (llama-bench-style) prefill, measured at its first cell
  for (const Cell& c : cells)
    if (std::find(warm_prompts.begin(), warm_prompts.end(), c.prompt_tokens) == warm_prompts.end()) warm_prompts.push_back(c.prompt_tokens);
  for (int p : warm_prompts) total += (std::max(1, o.warmup) + o.runs) * run_weight(p, 2);
  Progress progress(o.progress, total);

  // 2. Start-up: process start, mapping the weights and one 1-token step, the best of several runs (what TTFT
  // subtracts for an engine without a prompt-start mark), and the time to the mark (loading alone).
  std::vector<double> startup_samples, load_samples;
  for (int i = 0; i < o.warmup + startup_runs; ++i) {
    const bool warm = i < o.warmup;
    progress.line("start-up (1-token prompt, 1 new token) " + std::string(warm ? "warm-up" : "run " + std::to_string(i - o.warmup + 1) + "/" + std::to_string(startup_runs)),
                  run_weight(1, 1));
    const EngineRun r = runner.run(1, 1);
    progress.done();
    if (!r.error.empty()) throw EngineFailure("the engine failed on a 1-token prompt (" + r.command + "): " + r.error);
    if (!warm) startup_samples.push_back(r.arrivals_s.front());
    if (!warm && r.prompt_start_s >= 0) load_samples.push_back(r.prompt_start_s);
  }
  const double startup_s = *std::min_element(startup_samples.begin(), startup_samples.end());

  // 3. The matrix, ours and the baseline interleaved.
  json cell_reports = json::array();
  std::map<int, json> warm_pp;  // prompt length -> warm_prefill()
  const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& m : cell_metrics()) k.push_back(m.key);
    return k;
  }();
  for (std::size_t ci = 0; ci < cells.size(); ++ci) {
    const Cell& c = cells[ci];
    const std::string where = "cell " + std::to_string(ci + 1) + "/" + std::to_string(cells.size()) + " (" + cell_name(c) + ")";
    std::vector<std::map<std::string, double>> ours, theirs;
    json run_log = json::array(), baseline_log = json::array();
    std::vector<std::string> baseline_notes;
    int below_noise = 0, unresolved = 0;
    std::string cell_error;
    if (!warm_pp.count(c.prompt_tokens)) {  // before the first cell of this prompt length, beside the baseline's pp
      progress.line("pp " + std::to_string(c.prompt_tokens) + " warm (engine bench, in-process)",
                    (std::max(1, o.warmup) + o.runs) * run_weight(c.prompt_tokens, 2));
      std::string error;
      warm_pp[c.prompt_tokens] = warm_prefill(engine.binary, runner.view(), c.prompt_tokens, o.runs, o.warmup, threads, o.timeout_s, error);
      progress.done();
      if (!warm_pp[c.prompt_tokens].value("available", false))
        errors.push_back({{"cell", "pp " + std::to_string(c.prompt_tokens) + " warm"}, {"who", "ours"}, {"error", error}});
    }
    for (int i = 0; i < o.warmup + o.runs && cell_error.empty(); ++i) {
      const bool warm = i < o.warmup;
      const std::string run_label = warm ? "warm-up " + std::to_string(i + 1) + "/" + std::to_string(o.warmup)
                                         : "run " + std::to_string(i - o.warmup + 1) + "/" + std::to_string(o.runs);
      progress.line(where + " " + run_label + " ours", run_weight(c.prompt_tokens, c.gen_tokens));
      const EngineRun r = runner.run(c.prompt_tokens, c.gen_tokens);
      progress.done();
      if (!r.error.empty()) {
        cell_error = r.error;
        errors.push_back({{"cell", cell_name(c)}, {"who", "ours"}, {"command", r.command}, {"error", r.error}});
        break;
      }
      if (!warm) {
        ours.push_back(run_metrics(r, c.prompt_tokens, c.gen_tokens, startup_s));
        if (std::isnan(ours.back()["prefill_tok_s"])) ++below_noise;
        if (std::isnan(ours.back()["decode_tok_s"])) ++unresolved;
        run_log.push_back({{"prompt_start_s", r.prompt_start_s >= 0 ? json(r.prompt_start_s) : json(nullptr)},
                           {"first_token_s", r.arrivals_s.front()}, {"last_token_s", r.arrivals_s.back()},
                           {"tokens", r.arrivals_s.size()}, {"wall_s", r.wall_s}, {"peak_rss_kb", r.peak_rss_kb}});
      }
      if (with_baseline) {
        progress.line(where + " " + run_label + " baseline", run_weight(c.prompt_tokens, c.gen_tokens));
        const BaselineSample b = run_baseline(o.baseline_cmd, c, threads, checkpoint.string(), o.timeout_s);
        progress.done();
        if (!b.error.empty()) {
          cell_error = b.error;
          errors.push_back({{"cell", cell_name(c)}, {"who", "baseline"}, {"error", b.error}});
          break;
        }
        for (const auto& n : b.notes)
          if (std::find(baseline_notes.begin(), baseline_notes.end(), n) == baseline_notes.end()) baseline_notes.push_back(n);
        if (!warm) {
          theirs.push_back(b.metrics);
          baseline_log.push_back({{"adapter", b.adapter}, {"metrics", b.metrics}, {"reported_stddev", b.reported_stddev}, {"wall_s", b.wall_s}});
        }
      }
    }
    json cr = {{"prompt_tokens", c.prompt_tokens}, {"gen_tokens", c.gen_tokens}, {"pp_test", "pp " + std::to_string(c.prompt_tokens)},
               {"tg_test", "tg " + std::to_string(c.gen_tokens)}, {"error", cell_error.empty() ? json(nullptr) : json(cell_error)}};
    const json metrics = stats_of(ours, keys);
    cr["metrics"] = metrics;
    cr["runs_ttft_below_startup_noise"] = below_noise;
    cr["runs_decode_unresolved"] = unresolved;  // every token arrived in one read: no decode time to divide by
    cr["runs"] = run_log;
    progress.line("read-bandwidth probe after " + where, 0);
    const double bandwidth_after = frame_probe();
    progress.done();
    const double cell_bandwidth = std::max({bandwidth_before, bandwidth_after, working_set_gbs});
    cr["bandwidth_gbs"] = {{"before", bandwidth_before}, {"after", bandwidth_after}, {"bound", cell_bandwidth}};
    bandwidth_before = bandwidth_after;
    bandwidth_most = std::max(bandwidth_most, bandwidth_after);
    const double decode_bound = cost.decode_bound_tok_s(cell_bandwidth, c.prompt_tokens, c.gen_tokens);
    cr["bounds"] = {{"decode_tok_s", decode_bound}, {"tg_tok_s", decode_bound}};  // prefill's after the matrix
    cr["fraction_of_bound"] = {{"decode", finite_or_null(mean_of(metrics, "decode_tok_s") / decode_bound)}};
    progress.line("peak FLOP/s again after " + where, 0);
    peak = remeasure_prefill_peak(limits, cost.dtype, 2);  // each format kept at its largest figure
    progress.done();
    ++peak_measurements;
    if (with_baseline) {
      std::vector<std::string> bkeys;
      for (const auto& run : theirs)
        for (const auto& [k, v] : run)
          if (std::find(bkeys.begin(), bkeys.end(), k) == bkeys.end()) bkeys.push_back(k);
      const json bstats = stats_of(theirs, bkeys);
      json ratio = json::object();
      for (const std::string& k : keys) {
        const double ours_mean = mean_of(metrics, k), theirs_mean = mean_of(bstats, k);
        if (std::isfinite(ours_mean) && std::isfinite(theirs_mean) && theirs_mean > 0) ratio[k] = ours_mean / theirs_mean;
      }
      cr["baseline"] = {{"command", expand_baseline_command(o.baseline_cmd, c, threads, checkpoint.string())},
                        {"adapter", baseline_log.empty() ? json(nullptr) : baseline_log.front()["adapter"]},
                        {"metrics", bstats},
                        {"notes", baseline_notes},
                        {"runs", baseline_log}};
      cr["ratio"] = ratio;
    }
    cell_reports.push_back(cr);
  }
  const double prefill_bound = cost.prefill_bound_tok_s(peak.gflops);
  for (json& cr : cell_reports) {
    cr["bounds"]["prefill_tok_s"] = cr["bounds"]["pp_tok_s"] = prefill_bound;
    cr["fraction_of_bound"]["prefill"] = finite_or_null(mean_of(cr["metrics"], "prefill_tok_s") / prefill_bound);
  }
  for (const Cell& c : skipped)
    cell_reports.push_back({{"prompt_tokens", c.prompt_tokens}, {"gen_tokens", c.gen_tokens},
                            {"skipped", "prompt + generated tokens = " + std::to_string(c.prompt_tokens + c.gen_tokens) +
                                            " exceeds the engine's max_context of " + std::to_string(max_context)}});

  // 4. llama-bench-style rows: "pp P" from the warm in-process prefill of P tokens (warm_prefill; the cell (P, shortest
  // generation)'s cold-process figure beside it, and instead of it if the engine could not measure it), "tg N" from the
  // cell (shortest prompt, N).
  json llama_rows = json::array();
  auto find_cell = [&](int p, int g) -> const json* {
    for (const json& cr : cell_reports)
      if (cr["prompt_tokens"] == p && cr["gen_tokens"] == g && !cr.contains("skipped")) return &cr;
    return nullptr;
  };
  auto add_row = [&](const std::string& test, const json* cr, const char* metric) {
    if (!cr) return;
    json row = {{"test", test}, {"cell", {(*cr)["prompt_tokens"], (*cr)["gen_tokens"]}}, {"tok_s", (*cr)["metrics"][metric]},
                {"bound_tok_s", (*cr)["bounds"][metric]}};
    const double m = mean_of((*cr)["metrics"], metric);
    row["fraction_of_bound"] = finite_or_null(m / (*cr)["bounds"][metric].get<double>());
    if (cr->contains("baseline")) {
      row["baseline_tok_s"] = (*cr)["baseline"]["metrics"].value(metric, json(nullptr));
      row["ratio"] = (*cr)["ratio"].value(metric, json(nullptr));
    }
    llama_rows.push_back(row);
  };
  for (int p : o.matrix.prompts) {
    const json* best = nullptr;
    for (int g : o.matrix.gens)
      if (!best) best = find_cell(p, g);
    add_row("pp " + std::to_string(p), best, "pp_tok_s");
    if (!best) continue;
    json& row = llama_rows.back();
    row["cold_tok_s"] = row["tok_s"];  // a fresh process's first prefill (the cell's TTFT)
    const auto w = warm_pp.find(p);
    if (w == warm_pp.end() || !w->second.value("available", false)) {
      row["source"] = "cold";
      continue;
    }
    row["source"] = "warm";
    row["warm"] = w->second;
    row["tok_s"] = w->second["metrics"]["prefill_tok_s"];
    const double warm_mean = mean_of(w->second["metrics"], "prefill_tok_s");
    row["fraction_of_bound"] = finite_or_null(warm_mean / row["bound_tok_s"].get<double>());
    if (best->contains("baseline")) {
      // llama-bench times its pp warm, so ours is compared warm; a command printing our field names may well have
      // timed a fresh process, so it keeps the cell's cold comparison. Both ratios stay in the row.
      row["cold_ratio"] = row.value("ratio", json(nullptr));
      const bool warm_baseline = (*best)["baseline"].value("adapter", json(nullptr)) == "llama-bench";
      row["ratio_basis"] = warm_baseline ? "warm" : "cold";
      if (warm_baseline) {
        const double theirs = mean_of((*best)["baseline"]["metrics"], "pp_tok_s");
        row["ratio"] = std::isfinite(theirs) && theirs > 0 ? finite_or_null(warm_mean / theirs) : json(nullptr);
      }
    }
  }
  for (int g : o.matrix.gens) {
    const json* best = nullptr;
    for (int p : o.matrix.prompts)
      if (!best) best = find_cell(p, g);
    add_row("tg " + std::to_string(g), best, "tg_tok_s");
  }

  // 5. Supplementary runs.
  json supplementary = json::object();
  // Batch scaling: the engine's own bench decodes B sequences together (Model::forward_batch), prompts of the
  // matrix's shortest prompt, the matrix's shortest generation in decode steps.
  if (o.supplementary) {
    const std::vector<int> sizes = o.batch_sizes;
    std::string sizes_text;
    for (int b : sizes) sizes_text += (sizes_text.empty() ? "" : ",") + std::to_string(b);
    const int bp = o.matrix.prompts.front(), bg = o.matrix.gens.front();
    progress.line("batch scaling B=" + sizes_text + " (engine bench, in-process)", 0);
    std::string error;
    const json r = bp + bg <= max_context
                       ? engine_self_bench(engine.binary, runner.view(), {"--parts", "batch", "--batch", sizes_text, "--batch-prompt",
                                           std::to_string(bp), "--batch-gen", std::to_string(bg), "--runs", std::to_string(o.runs),
                                           "--warmup", std::to_string(o.warmup), "--threads", std::to_string(threads)},
                                           o.timeout_s, error)
                       : json(nullptr);
    progress.done();
    if (r.is_object() && r.contains("supplementary") && r["supplementary"].contains("batch_scaling")) {
      supplementary["batch_scaling"] = r["supplementary"]["batch_scaling"];
      if (supplementary["batch_scaling"].value("available", false))
        supplementary["batch_scaling"]["source"] = "ENGINE bench --parts batch (in-process, Model::forward_batch)";
    } else {
      if (error.empty()) error = bp + bg > max_context ? "prompt + decode steps exceed max_context" : "the engine's report has no batch_scaling";
      supplementary["batch_scaling"] = {{"available", false}, {"batch_sizes", sizes}, {"reason", "not available: " + error}};
      errors.push_back({{"cell", "batch scaling"}, {"who", "ours"}, {"error", error}});
    }
  } else {
    supplementary["batch_scaling"] = nullptr;
  }
  if (chunk_study) {
    json rows = json::array();
    for (int chunk : chunks) {
      std::vector<std::map<std::string, double>> runs;
      std::string error;
      const std::string label = chunk == 0 ? (compiled_chunk > 0 ? "engine default (" + std::to_string(compiled_chunk) + ")" : "none")
                                           : std::to_string(chunk);
      for (int i = 0; i < o.warmup + o.runs; ++i) {
        const bool warm = i < o.warmup;
        progress.line("chunked prefill p=" + std::to_string(chunk_prompt) + " chunk " + label + " " +
                          (warm ? "warm-up" : "run " + std::to_string(i - o.warmup + 1) + "/" + std::to_string(o.runs)),
                      run_weight(chunk_prompt, 1));
        const EngineRun r = runner.run(chunk_prompt, 1, chunk);
        progress.done();
        if (!r.error.empty()) {
          error = r.error;
          errors.push_back({{"cell", "chunked prefill " + label}, {"who", "ours"}, {"command", r.command}, {"error", r.error}});
          break;
        }
        if (!warm) {
          const double ttft_s = std::max(0.0, r.arrivals_s.front() - run_origin(r, startup_s));
          runs.push_back({{"ttft_ms", ttft_s * 1e3}, {"peak_rss_mb", double(r.peak_rss_kb) / 1024.0},
                          {"prefill_tok_s", ttft_s > 0 ? chunk_prompt / ttft_s : kNaN}});
        }
      }
      rows.push_back({{"chunk", chunk}, {"label", label}, {"metrics", stats_of(runs, {"ttft_ms", "prefill_tok_s", "peak_rss_mb"})},
                      {"error", error.empty() ? json(nullptr) : json(error)}});
    }
    supplementary["chunked_prefill"] = {{"prompt_tokens", chunk_prompt}, {"rows", rows}};
  } else {
    supplementary["chunked_prefill"] = nullptr;
  }

  const platform::CpuInfo cpu = platform::detect_cpu();
  json report;
  report["format"] = "metainfer-bench/1";
  report["engine"] = {{"dir", fs::absolute(engine.dir).string()},
                      {"name", engine.name},
                      {"binary", engine.binary.string()},
                      {"kernel_level", plan.at("platform").value("kernel_level", "")},
                      {"max_context", max_context},
                      {"chunked_prefill", compiled_chunk},
                      {"verification", verification_state(engine.dir)}};
  report["model"] = cost.to_json();
  report["model"]["path"] = checkpoint.string();
  report["model"]["architecture"] = plan.at("model").value("architecture", "");
  report["machine"] = {{"cpu", cpu.brand}, {"allowed_cpus", cpu.allowed_cpus}, {"features", cpu.feature_names()}};
  report["limits"] = limits.to_json();
  report["limits"]["prefill_peak"] = peak.to_json();
  report["limits"]["prefill_peak"]["measurements"] = peak_measurements;
  report["limits"]["prefill_peak"]["gflops_at_start"] = peak_at_start;
  report["limits"]["prefill_peak"]["note"] = "the largest of the measurements: at the start and after every cell";
  report["settings"] = {{"matrix", o.matrix.name},  {"prompts", o.matrix.prompts}, {"gens", o.matrix.gens},
                        {"runs", o.runs},           {"warmup", o.warmup},         {"threads", threads},
                        {"baseline_cmd", with_baseline ? json(o.baseline_cmd) : json(nullptr)}};
  const auto ms_list = [](const std::vector<double>& v) {
    json s = json::array();
    for (double x : v) s.push_back(x * 1e3);
    return s;
  };
  report["startup_ms"] = {{"best", startup_s * 1e3}, {"samples", ms_list(startup_samples)}, {"load_samples", ms_list(load_samples)}};
  // What TTFT and latency count from: every run's own mark, or (an engine without --mark-prompt-start) the best
  // start-up above, so a short prompt's TTFT can vanish in start-up noise (runs_ttft_below_startup_noise).
  report["ttft_origin"] = runner.mark_prompt_start() ? "prompt_start_mark" : "best_startup";
  report["cells"] = cell_reports;
  report["llama_bench"] = llama_rows;
  report["supplementary"] = supplementary;
  if (o.profile) {
    progress.line("profile (engine bench --profile, in-process)", 0);
    std::ostringstream bw, pk;
    bw.precision(6), pk.precision(6);
    bw << bandwidth_most, pk << peak.gflops;
    std::string error;
    const int profile_prompt = std::min(256, max_context - 1);
    const json r = engine_self_bench(engine.binary, runner.view(), {"--parts", "profile", "--profile-prompt", std::to_string(profile_prompt),
                                     "--threads", std::to_string(threads), "--bandwidth-gbs", bw.str(), "--peak-gflops", pk.str()},
                                     o.timeout_s, error);
    progress.done();
    if (r.is_object() && r.contains("profile")) {
      report["profile"] = r["profile"];
    } else {
      report["profile"] = nullptr;
      errors.push_back({{"cell", "profile"}, {"who", "ours"}, {"error", error.empty() ? "the engine's report has no profile" : error}});
    }
  }
  report["errors"] = errors;
  report["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  if (o.progress) *o.progress << "bench: done in " << report["elapsed_s"].get<double>() << " s\n" << std::flush;
  return report;
}

}  // namespace mi::bench
