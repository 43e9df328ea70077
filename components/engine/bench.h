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
//
// The loops that drive the model are templates over it (below); the matrix names, the plan and the report built from
// the measurements are model-independent and live in bench.cpp, compiled once into engine_core for every engine.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.h"
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

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds this process has used (all threads). Over a timed loop, cpu / (wall x threads) below 1 shows the
// threads were waiting (memory, the pool) or, on a shared machine, not scheduled: reported beside the rates so a
// slow row can be told from a busy machine.
double cpu_seconds();

// Deterministic prompt ids in [1, vocab): the same for every run of a cell, different per seed (each batch row).
std::vector<int32_t> prompt_ids(int n, int vocab, uint64_t seed);

// Peak resident set of the process since the last reset_peak_rss(), in KiB.
class PeakRss {
 public:
  void reset();
  double mib() const;
  const char* source() const;

 private:
  bool resettable_ = false;
};

struct Matrix {
  std::vector<int> prompts, gens;
  int chunk_prompt = 0;
  std::vector<int> chunks;
};

// The matrices of `metainfer bench` (toolkit/bench/workload.cpp): the engine cannot include toolkit code.
Matrix matrix_named(const std::string& name);

// One run's metrics by name (ttft_ms, tpot_ms, ...; batch runs: aggregate_tok_s, ...).
using RunMetrics = std::map<std::string, double>;

// The metrics of `metainfer bench`'s run_metrics for a `gen`-token generation after a `prompt`-token prompt whose
// first token came `first_s` and last `last_s` seconds after the start.
RunMetrics cell_metrics(int prompt, int gen, double first_s, double last_s, double peak_rss_mb);

// "warm-up 1/1" or "run 2/3": the progress label of run i of warmup + runs.
std::string run_label(int i, int warmup, int runs);

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
RunMetrics run_cell(M& model, int prompt, int gen, int chunk, PeakRss& rss, uint64_t seed) {
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
  return cell_metrics(prompt, gen, first, last, rss.mib());
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

BenchPlan plan_bench(const BenchSettings& s, int max_context);

// What run_engine_bench measured, turned into the report by bench_report (bench.cpp).
struct BenchMeasurements {
  struct Cell {
    int prompt = 0, gen = 0;
    bool skipped = false;  // prompt + gen beyond max_context
    std::vector<bench_detail::RunMetrics> runs;
  };
  struct ChunkRow {
    int chunk = 0;  // 0: none (the whole prompt, as far as the scratch allows)
    std::vector<bench_detail::RunMetrics> runs;
  };
  std::vector<Cell> cells;
  bool chunked = false;
  int chunked_prompt = 0;
  std::vector<ChunkRow> chunk_rows;
  std::optional<StepProfile> profile;
  std::optional<BatchStepProfile> profile_batch;
  bool batch_unavailable = false;  // the batch part was asked of a model without forward_batch
  bool batch_measured = false;
  std::vector<std::vector<bench_detail::RunMetrics>> batch_runs;  // per plan.batches entry
  std::string peak_rss_source;
  double elapsed_s = 0;
};

// The report ("metainfer-bench/1", source "engine") of the measurements.
nlohmann::ordered_json bench_report(const BenchSettings& s, const BenchPlan& plan, const OpCostModel& cost, int max_context,
                                    int max_step, int threads, const BenchMeasurements& m);

// Runs the planned parts and returns what they measured (bench_report turns it into the report). `make_model(max_batch,
// max_context)` constructs the model; `progress` gets one line per run.
template <EngineModel M, class MakeModel>
BenchMeasurements run_engine_bench(const BenchSettings& s, const BenchPlan& plan, int max_context, int max_step,
                                   int threads, MakeModel make_model, std::ostream& progress) {
  using namespace bench_detail;
  const Matrix& mx = plan.mx;
  const std::vector<int>& batches = plan.batches;
  const int max_batch = plan.max_batch, batch_prompt = plan.batch_prompt, batch_gen = plan.batch_gen;

  PeakRss rss;
  BenchMeasurements out;
  const auto t_all = Clock::now();

  // 1. The matrix (and the chunked-prefill study), on a one-sequence model of the engine's context.
  if (plan.matrix || plan.chunked || plan.profile) {
    M model = make_model(1, max_context);
    if (plan.matrix) {
      int index = 0;
      const int total = int(mx.prompts.size() * mx.gens.size());
      for (int p : mx.prompts)
        for (int g : mx.gens) {
          ++index;
          BenchMeasurements::Cell cell{p, g, p + g > max_context, {}};
          if (!cell.skipped)
            for (int i = 0; i < s.warmup + s.runs; ++i) {
              progress << "bench: cell " << index << "/" << total << " (p=" << p << " n=" << g << ") "
                       << run_label(i, s.warmup, s.runs) << " | elapsed " << since(t_all) << " s\n" << std::flush;
              RunMetrics m = run_cell(model, p, g, max_step, rss, 0);
              if (i >= s.warmup) cell.runs.push_back(std::move(m));
            }
          out.cells.push_back(std::move(cell));
        }
    }
    if (plan.chunked) {
      out.chunked = true;
      const int prompt = std::min(mx.chunk_prompt, max_context - 1);
      out.chunked_prompt = prompt;
      std::vector<int> chunks = {0};
      for (int c : mx.chunks)
        if (c < prompt && c <= max_step) chunks.push_back(c);
      for (int chunk : chunks) {
        BenchMeasurements::ChunkRow row{chunk, {}};
        const std::string name = chunk == 0 ? "none" : std::to_string(chunk);
        for (int i = 0; i < s.warmup + s.runs; ++i) {
          progress << "bench: chunked prefill p=" << prompt << " chunk " << name << " " << run_label(i, s.warmup, s.runs)
                   << " | elapsed " << since(t_all) << " s\n" << std::flush;
          // "none" is the whole prompt in one step, as far as the scratch allows (max_step).
          RunMetrics m = run_cell(model, prompt, 1, chunk == 0 ? max_step : chunk, rss, 0);
          if (i >= s.warmup) row.runs.push_back(std::move(m));
        }
        out.chunk_rows.push_back(std::move(row));
      }
    }
    if (plan.profile) {
      if constexpr (requires(M& m, model::OpProfiler* p) { m.set_profiler(p); M::op_names(); }) {
        progress << "bench: profile (one decode step after a " << s.profile_prompt << "-token prefill, and that prefill)\n" << std::flush;
        ProfileSettings ps;
        ps.prompt = s.profile_prompt;
        ps.max_step = max_step;
        ps.bandwidth_gbs = s.bandwidth_gbs;
        ps.peak_gflops = s.peak_gflops;
        out.profile = profile_steps(model, prompt_ids(s.profile_prompt, model.vocab_size(), 7), max_context, ps);
      } else {
        fail("--profile: this model has no op profiler (set_profiler / op_names)");
      }
    }
  }

  // 2. Batch scaling, on a model that holds the largest batch at the context the study needs. An engine generated
  // for max_batch 1 has no batched decode path to measure; the report says so.
  if (plan.batch && !BatchedEngineModel<M>) out.batch_unavailable = true;
  if constexpr (BatchedEngineModel<M>) if (plan.batch) {
    M model = make_model(max_batch, batch_prompt + batch_gen);
    const int V = model.vocab_size();
    // The batch sizes take turns run by run (B = 1, 2, 4, 8, then again), so a machine that gets busier or quieter
    // during the study weighs on every size alike rather than on whichever ran last.
    out.batch_measured = true;
    out.batch_runs.resize(batches.size());
    for (int i = 0; i < s.warmup + s.runs; ++i)
      for (std::size_t bi = 0; bi < batches.size(); ++bi) {
        const int B = batches[bi];
        progress << "bench: batch scaling B=" << B << " " << run_label(i, s.warmup, s.runs) << " | elapsed " << since(t_all) << " s\n"
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
          out.batch_runs[bi].push_back({{"aggregate_tok_s", double(B) * batch_gen / t}, {"per_sequence_tok_s", batch_gen / t},
                                        {"step_ms", t / batch_gen * 1e3}, {"cpu_share", cpu / (t * threads)}});
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
        out.profile_batch = profile_batch_steps(model, seqs, tokens, batch_prompt, batch_gen, ps);
        for (int seq : seqs) model.free_sequence(seq);
      }
    }
  }
  out.peak_rss_source = rss.source();
  out.elapsed_s = since(t_all);
  return out;
}

}  // namespace mi::engine
