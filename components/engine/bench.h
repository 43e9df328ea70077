// `ENGINE bench`: the engine measures itself in-process, with the workload matrix of `metainfer bench` and the same
// JSON field names in its cells (toolkit/bench/bench.cpp), so the two reports read alike:
//
//   ENGINE bench --model DIR [--matrix paper|quick] [--prompts 11,256] [--gens 16,32] [--runs N] [--warmup N]
//                [--threads T] [--batch 1,2,4,8] [--batch-prompt P] [--batch-gen N] [--max-batch B]
//                [--parts matrix,batch,chunked,profile] [--profile] [--profile-prompt P] [--bandwidth-gbs X]
//                [--peak-gflops Y] [--mode precise|fast] [--json FILE]
//
// Runs, in process and with no tokenizer or sampler in the way (greedy argmax of the logits, as a client would need):
//   matrix   per cell (prompt p, generation n): TTFT (prefill + first argmax), TPOT = (latency - TTFT) / (n - 1),
//            e2e, decode, prefill tok/s, llama-bench pp/tg/pg, peak RSS; mean +- stddev over --runs after --warmup.
//   batch    batch scaling: B sequences, each prefilled with its own --batch-prompt ids, then --batch-gen decode steps
//            (default: the shortest generation, capped by the context left) of all B together (Model::forward_batch); aggregate tok/s = B x steps / time, speedup vs B = 1.
//   chunked  chunked prefill at the matrix's chunk prompt: TTFT and peak RSS per chunk vs none.
//   profile  (--profile) per-op time of one decode step (after a --profile-prompt prefill) and of that prefill, with
//            bytes and FLOPs per op (engine/op_cost.h), achieved GB/s, GFLOP/s, and fraction of the bound when
//            --bandwidth-gbs and --peak-gflops are given (`metainfer bench --profile` passes its measured limits);
//            without them the fractions are null (no probe is run here). With the batch part too, also the per-op
//            time of the largest batch's decode step (report "profile_batch").
// Peak RSS per run: the high-water mark is reset before the run (/proc/self/clear_refs, value 5) and VmHWM read
// after; where that is refused, getrusage's process-lifetime maximum is reported and "peak_rss_source" says so.
// Progress goes to the error stream; the report to --json (and a short table to the output stream).
#pragma once
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/bench_stats.h"
#include "engine/model_interface.h"
#include "engine/op_cost.h"
#include "engine/op_profile.h"
#include "model/lm_head.h"
#include "model/op_profiler.h"

namespace mi::engine {

struct BenchSettings {
  std::string model_dir;
  std::string matrix = "paper";
  std::vector<int> prompts, gens;  // empty: the matrix's
  int runs = 3;
  int warmup = 1;
  std::vector<int> batch = {1, 2, 4, 8};
  int batch_prompt = 0;  // 0: the matrix's shortest prompt
  int batch_gen = 0;     // 0: the matrix's shortest generation
  int max_batch = 0;     // 0: the largest of --batch
  std::vector<std::string> parts = {"matrix", "batch", "chunked"};
  bool profile = false;
  int profile_prompt = 256;
  double bandwidth_gbs = 0;  // 0: unknown
  double peak_gflops = 0;    // 0: unknown
  std::string json_path;
};

namespace bench_detail {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds this process has used (all threads). Over a timed loop, cpu / (wall x threads) below 1 shows the
// threads were waiting (memory, the pool) or, on a shared machine, not scheduled: reported beside the rates so a
// slow row can be told from a busy machine.
inline double cpu_seconds() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Deterministic prompt ids in [1, vocab): the same for every run of a cell, different per seed (each batch row).
inline std::vector<int32_t> prompt_ids(int n, int vocab, uint64_t seed) {
  std::vector<int32_t> ids(std::size_t(std::max(n, 0)));
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& id : ids) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;  // xorshift64*
    id = int32_t(1 + (x * 0x2545F4914F6CDD1Dull >> 33) % uint64_t(std::max(vocab - 1, 1)));
  }
  return ids;
}

// Peak resident set of the process since the last reset_peak_rss(), in KiB.
class PeakRss {
 public:
  void reset() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.flush();
    resettable_ = bool(f);
  }
  double mib() const {
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
  const char* source() const {
    return resettable_ ? "VmHWM after a reset per run (/proc/self/clear_refs)" : "getrusage ru_maxrss (process lifetime maximum)";
  }

 private:
  bool resettable_ = false;
};

struct Matrix {
  std::vector<int> prompts, gens;
  int chunk_prompt = 0;
  std::vector<int> chunks;
};

// The matrices of `metainfer bench` (toolkit/bench/workload.cpp): the engine cannot include toolkit code.
inline Matrix matrix_named(const std::string& name) {
  if (name == "paper") return {{11, 256, 1021}, {256, 1024, 2048}, 1021, {128, 256, 512}};
  if (name == "quick") return {{11, 64}, {16, 32}, 64, {16, 32}};
  fail("--matrix: expected paper or quick, got \"", name, "\"");
}

template <EngineModel M>
int greedy_prefill(M& model, int seq, const std::vector<int32_t>& ids, int chunk, std::vector<float>& logits) {
  for (std::size_t first = 0; first < ids.size(); first += std::size_t(chunk)) {
    const int n = int(std::min<std::size_t>(std::size_t(chunk), ids.size() - first));
    model.forward(seq, ids.data() + first, n, logits.data(), false);
  }
  return model::greedy_token(logits.data(), model.vocab_size());
}

// One generation of `gen` tokens after a `prompt`-token prompt: the metrics of `metainfer bench`'s run_metrics.
template <EngineModel M>
std::map<std::string, double> run_cell(M& model, int prompt, int gen, int chunk, PeakRss& rss, uint64_t seed) {
  const std::vector<int32_t> ids = prompt_ids(prompt, model.vocab_size(), seed);
  std::vector<float> logits(std::size_t(model.vocab_size()));
  rss.reset();
  const auto t0 = Clock::now();
  const int seq = model.new_sequence();
  int32_t token = greedy_prefill(model, seq, ids, chunk, logits);
  const double first = since(t0);
  for (int i = 1; i < gen; ++i) {
    model.forward(seq, &token, 1, logits.data(), false);
    token = model::greedy_token(logits.data(), model.vocab_size());
  }
  const double last = since(t0);
  model.free_sequence(seq);
  std::map<std::string, double> m;
  m["ttft_ms"] = first * 1e3;
  m["latency_ms"] = last * 1e3;
  m["peak_rss_mb"] = rss.mib();
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

inline ordered_json stats_json(const std::vector<std::map<std::string, double>>& runs, const std::vector<std::string>& keys) {
  ordered_json out = ordered_json::object();
  for (const std::string& k : keys) {
    std::vector<double> v;
    for (const auto& r : runs)
      if (r.count(k)) v.push_back(r.at(k));
    out[k] = summarize_runs(v).to_json();
  }
  return out;
}

inline const std::vector<std::string>& cell_keys() {
  static const std::vector<std::string> k = {"ttft_ms",       "tpot_ms",  "latency_ms", "e2e_tok_s", "decode_tok_s",
                                             "prefill_tok_s", "pp_tok_s", "tg_tok_s",   "pg_tok_s",  "peak_rss_mb"};
  return k;
}

}  // namespace bench_detail

// The settings checked and resolved against the engine (max_context, the scratch's max_step): mi::Error naming the
// flag otherwise.
struct BenchPlan {
  bench_detail::Matrix mx;
  std::vector<int> batches;
  int max_batch = 1, batch_prompt = 0, batch_gen = 0;
  bool matrix = false, batch = false, chunked = false, profile = false;
};

inline BenchPlan plan_bench(const BenchSettings& s, int max_context) {
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

// Runs the planned parts and returns the report ("metainfer-bench/1", source "engine"). `make_model(max_batch,
// max_context)` constructs the model; `progress` gets one line per run.
template <EngineModel M, class MakeModel>
nlohmann::ordered_json run_engine_bench(const BenchSettings& s, const BenchPlan& plan, const OpCostModel& cost,
                                        int max_context, int max_step, int threads, MakeModel make_model,
                                        std::ostream& progress) {
  using namespace bench_detail;
  const Matrix& mx = plan.mx;
  auto wants = [&](const char* part) {
    const std::string p = part;
    return p == "matrix" ? plan.matrix : p == "batch" ? plan.batch : plan.chunked;
  };
  const std::vector<int>& batches = plan.batches;
  const int max_batch = plan.max_batch, batch_prompt = plan.batch_prompt, batch_gen = plan.batch_gen;

  PeakRss rss;
  ordered_json report;
  report["format"] = "metainfer-bench/1";
  report["source"] = "engine";
  ordered_json errors = ordered_json::array();
  const auto t_all = Clock::now();
  auto label = [](int i, int warmup, int runs) {
    return i < warmup ? "warm-up " + std::to_string(i + 1) + "/" + std::to_string(warmup)
                      : "run " + std::to_string(i - warmup + 1) + "/" + std::to_string(runs);
  };

  // 1. The matrix (and the chunked-prefill study), on a one-sequence model of the engine's context.
  ordered_json cells = ordered_json::array(), llama_rows = ordered_json::array(), supplementary = ordered_json::object();
  if (plan.matrix || plan.chunked || plan.profile) {
    M model = make_model(1, max_context);
    if (wants("matrix")) {
      int index = 0;
      const int total = int(mx.prompts.size() * mx.gens.size());
      for (int p : mx.prompts)
        for (int g : mx.gens) {
          ++index;
          ordered_json cr = {{"prompt_tokens", p}, {"gen_tokens", g}};
          if (p + g > max_context) {
            cr["skipped"] = "prompt + generated tokens = " + std::to_string(p + g) + " exceeds the engine's max_context of " +
                            std::to_string(max_context);
            cells.push_back(cr);
            continue;
          }
          std::vector<std::map<std::string, double>> runs;
          ordered_json run_log = ordered_json::array();
          for (int i = 0; i < s.warmup + s.runs; ++i) {
            progress << "bench: cell " << index << "/" << total << " (p=" << p << " n=" << g << ") " << label(i, s.warmup, s.runs)
                     << " | elapsed " << since(t_all) << " s\n" << std::flush;
            const auto m = run_cell(model, p, g, max_step, rss, 0);
            if (i >= s.warmup) {
              runs.push_back(m);
              run_log.push_back({{"ttft_ms", m.at("ttft_ms")}, {"latency_ms", m.at("latency_ms")}, {"tokens", g},
                                 {"peak_rss_mb", m.at("peak_rss_mb")}});
            }
          }
          cr["pp_test"] = "pp " + std::to_string(p);
          cr["tg_test"] = "tg " + std::to_string(g);
          cr["error"] = nullptr;
          cr["metrics"] = stats_json(runs, cell_keys());
          cr["runs"] = run_log;
          cells.push_back(cr);
        }
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
    if (wants("chunked")) {
      const int prompt = std::min(mx.chunk_prompt, max_context - 1);
      std::vector<int> chunks = {0};
      for (int c : mx.chunks)
        if (c < prompt && c <= max_step) chunks.push_back(c);
      ordered_json rows = ordered_json::array();
      for (int chunk : chunks) {
        std::vector<std::map<std::string, double>> runs;
        const std::string name = chunk == 0 ? "none" : std::to_string(chunk);
        for (int i = 0; i < s.warmup + s.runs; ++i) {
          progress << "bench: chunked prefill p=" << prompt << " chunk " << name << " " << label(i, s.warmup, s.runs)
                   << " | elapsed " << since(t_all) << " s\n" << std::flush;
          // "none" is the whole prompt in one step, as far as the scratch allows (max_step).
          const auto m = run_cell(model, prompt, 1, chunk == 0 ? max_step : chunk, rss, 0);
          if (i >= s.warmup) runs.push_back({{"ttft_ms", m.at("ttft_ms")}, {"prefill_tok_s", m.at("prefill_tok_s")}, {"peak_rss_mb", m.at("peak_rss_mb")}});
        }
        rows.push_back({{"chunk", chunk}, {"label", chunk == 0 && max_step < prompt ? "none (capped at " + std::to_string(max_step) + ")" : name},
                        {"metrics", stats_json(runs, {"ttft_ms", "prefill_tok_s", "peak_rss_mb"})}, {"error", nullptr}});
      }
      supplementary["chunked_prefill"] = {{"prompt_tokens", prompt}, {"rows", rows},
                                          {"note", "the scratch is sized once at start-up for the engine's largest step, so peak RSS "
                                                   "does not shrink with a smaller chunk in this process"}};
    }
    if (plan.profile) {
      if constexpr (requires(M& m, model::OpProfiler* p) { m.set_profiler(p); M::op_names(); }) {
        progress << "bench: profile (one decode step after a " << s.profile_prompt << "-token prefill, and that prefill)\n" << std::flush;
        ProfileSettings ps;
        ps.prompt = s.profile_prompt;
        ps.max_step = max_step;
        ps.bandwidth_gbs = s.bandwidth_gbs;
        ps.peak_gflops = s.peak_gflops;
        report["profile"] = profile_steps(model, cost, prompt_ids(s.profile_prompt, model.vocab_size(), 7), max_context, ps);
      } else {
        fail("--profile: this model has no op profiler (set_profiler / op_names)");
      }
    }
  }

  // 2. Batch scaling, on a model that holds the largest batch at the context the study needs. An engine generated
  // for max_batch 1 has no batched decode path to measure; the report says so.
  if (wants("batch") && !BatchedEngineModel<M>) {
    supplementary["batch_scaling"] = {
        {"available", false},
        {"batch_sizes", batches},
        {"reason", "not available: this engine was generated with runtime.max_batch = 1, so it has no batched decode "
                   "path (forward_batch); regenerate with max_batch >= 2 to measure batch scaling"}};
  }
  if constexpr (BatchedEngineModel<M>) if (wants("batch")) {
    M model = make_model(max_batch, batch_prompt + batch_gen);
    const int V = model.vocab_size();
    // The batch sizes take turns run by run (B = 1, 2, 4, 8, then again), so a machine that gets busier or quieter
    // during the study weighs on every size alike rather than on whichever ran last.
    std::vector<std::vector<std::map<std::string, double>>> runs(batches.size());
    for (int i = 0; i < s.warmup + s.runs; ++i)
      for (std::size_t bi = 0; bi < batches.size(); ++bi) {
        const int B = batches[bi];
        progress << "bench: batch scaling B=" << B << " " << label(i, s.warmup, s.runs) << " | elapsed " << since(t_all) << " s\n"
                 << std::flush;
        std::vector<int> seqs;
        std::vector<int32_t> tokens;
        std::vector<float> logits(std::size_t(B) * std::size_t(V));
        for (int b = 0; b < B; ++b) {
          seqs.push_back(model.new_sequence());
          tokens.push_back(greedy_prefill(model, seqs.back(), prompt_ids(batch_prompt, V, uint64_t(b)),
                                          std::min(max_step, batch_prompt + batch_gen), logits));
        }
        const double cpu0 = cpu_seconds();
        const auto t0 = Clock::now();
        for (int step = 0; step < batch_gen; ++step) {
          model.forward_batch(seqs.data(), tokens.data(), B, logits.data());
          for (int b = 0; b < B; ++b) tokens[std::size_t(b)] = model::greedy_token(logits.data() + std::size_t(b) * V, V);
        }
        const double t = since(t0), cpu = cpu_seconds() - cpu0;
        for (int seq : seqs) model.free_sequence(seq);
        if (i >= s.warmup)
          runs[bi].push_back({{"aggregate_tok_s", double(B) * batch_gen / t}, {"per_sequence_tok_s", batch_gen / t},
                              {"step_ms", t / batch_gen * 1e3}, {"cpu_share", cpu / (t * threads)}});
      }
    // speedup: of the mean aggregate rates; speedup_best: of the best runs (the least disturbed on a shared machine).
    ordered_json rows = ordered_json::array();
    double base = kNaN, base_best = kNaN;
    for (std::size_t bi = 0; bi < batches.size(); ++bi) {
      const ordered_json metrics = stats_json(runs[bi], {"aggregate_tok_s", "per_sequence_tok_s", "step_ms", "cpu_share"});
      const double aggregate = metrics["aggregate_tok_s"].is_object() ? metrics["aggregate_tok_s"]["mean"].get<double>() : kNaN;
      double best = kNaN;
      for (const auto& r : runs[bi]) best = std::isnan(best) ? r.at("aggregate_tok_s") : std::max(best, r.at("aggregate_tok_s"));
      if (batches[bi] == 1) base = aggregate, base_best = best;
      auto ratio = [](double a, double b) { return std::isfinite(a) && std::isfinite(b) && b > 0 ? ordered_json(a / b) : ordered_json(nullptr); };
      rows.push_back({{"batch", batches[bi]}, {"metrics", metrics}, {"best_aggregate_tok_s", std::isfinite(best) ? ordered_json(best) : ordered_json(nullptr)},
                      {"speedup", ratio(aggregate, base)}, {"speedup_best", ratio(best, base_best)}});
    }
    if (plan.profile) {
      if constexpr (requires(M& m, model::OpProfiler* p) { m.set_profiler(p); M::op_names(); }) {
        const int B = batches.back();
        progress << "bench: profile (" << batch_gen << " batched decode steps of B=" << B << ")\n" << std::flush;
        std::vector<int> seqs;
        std::vector<int32_t> tokens;
        std::vector<float> logits(static_cast<std::size_t>(V));
        for (int b = 0; b < B; ++b) {
          seqs.push_back(model.new_sequence());
          tokens.push_back(greedy_prefill(model, seqs.back(), prompt_ids(batch_prompt, V, uint64_t(b)),
                                          std::min(max_step, batch_prompt + batch_gen), logits));
        }
        ProfileSettings ps;
        ps.bandwidth_gbs = s.bandwidth_gbs;
        ps.peak_gflops = s.peak_gflops;
        report["profile_batch"] = profile_batch_steps(model, cost, seqs, tokens, batch_prompt, batch_gen, ps);
        for (int seq : seqs) model.free_sequence(seq);
      }
    }
    supplementary["batch_scaling"] = {{"available", true}, {"batch_sizes", batches}, {"prompt_tokens", batch_prompt},
                                      {"gen_tokens", batch_gen}, {"max_batch", max_batch}, {"rows", rows}};
  }

  report["settings"] = {{"matrix", s.matrix}, {"prompts", mx.prompts}, {"gens", mx.gens}, {"runs", s.runs},
                        {"warmup", s.warmup}, {"threads", threads},  {"parts", s.parts}, {"peak_rss_source", rss.source()}};
  report["cells"] = cells;
  report["llama_bench"] = llama_rows;
  report["supplementary"] = supplementary;
  report["errors"] = errors;
  report["elapsed_s"] = since(t_all);
  return report;
}

}  // namespace mi::engine
