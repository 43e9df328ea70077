// `metainfer bench <engine-dir | constraints.toml> [--matrix paper|quick] [--runs N] [--baseline-cmd CMD]
// [--json F] [--plot F.svg] ...`: the engine's latency and throughput over a workload matrix, beside the machine's
// measured limits and optionally a baseline engine (README "Benchmarks"). Markdown on stdout, progress on stderr.
// Exit 0 ok; 1 an engine or baseline run failed (the report still lists the rest); 2 bad input; 3 a constraints
// file the CKB does not cover.
#include <algorithm>
#include <fstream>
#include <iostream>

#include "bench/bench.h"
#include "bench/report.h"
#include "bench/svg_plot.h"
#include "ckb/ckb.h"
#include "cli/commands.h"
#include "common/error.h"
#include "coverage/coverage.h"
#include "gates/gates.h"
#include "generator/generator.h"
#include "platform/cpu_info.h"
#include "tune/tuning_experience.h"

namespace mi::cli {
namespace fs = std::filesystem;

namespace {

void check_output_path(const std::string& flag, const std::string& file) {
  if (file.empty()) return;
  const fs::path parent = fs::absolute(fs::path(file)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) fail(flag, ": the directory '", parent.string(), "' does not exist");
  if (fs::is_directory(fs::path(file), ec)) fail(flag, ": '", file, "' is a directory");
}

void write_output(const std::string& flag, const std::string& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail(flag, ": cannot write '", file, "'");
}

// A constraints file: coverage, the engine written (to `out`, default engines/<name>) and built by B0. Not the
// other gates: the report says the engine's verification state.
fs::path engine_from_constraints(const std::string& file, const std::string& out, const std::string& ckb_dir, int& exit_code) {
  const ckb::Ckb ckb = ckb::load(ckb_dir);
  nlohmann::json tuning_report;  // kernel parameters measured before on this CPU (tune/tuning_experience.h)
  const coverage::Plan plan =
      tune::plan_with_experience(ckb, fs::path(ckb_dir) / "experience" / "kernel_tuning.toml", file, {}, tuning_report);
  if (!plan.covered) {
    std::cout << plan.to_text();
    exit_code = kExitNotCovered;
    fail(file, ": the constraints are not covered (the gap report is above)");
  }
  generator::GenerateOptions go;
  go.out = out.empty() ? fs::path("engines") / generator::engine_name(plan) : fs::path(out);
  go.tuning_report = tuning_report;
  const generator::Engine engine = generator::write_engine(ckb, plan, go);
  std::cerr << "bench: generated " << engine.dir.string() << "; building it (B0)\n";
  gates::BuildRecord record;
  const gates::GateResult b0 = gates::build_gate(engine, std::max(1, platform::detect_cpu().allowed_cpus), record,
                                                  /*stage_tests=*/false);
  if (!b0.passed) {
    exit_code = kExitFailure;
    fail("the engine in ", engine.dir.string(), " did not build: ", b0.summary);
  }
  return engine.dir;
}

}  // namespace

void register_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Measure an engine's latency and throughput over a workload matrix against the machine's limits");
  struct Options {
    std::string target, model, matrix = "paper", baseline_cmd, json_file, plot_file, out, ckb_dir = ckb::default_ckb_dir().string();
    std::vector<int> prompts, gens;
    int runs = 3, warmup = 1, threads = 0, bandwidth_mib = 1024;
    double timeout_s = 1800;
    bool no_supplementary = false, profile = false;
    std::vector<int> batch = {1, 2, 4, 8};
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("target", opts->target, "engine directory (built: DIR/build/<engine>), or a constraints file to generate and build one")->required();
  cmd->add_option("--model", opts->model, "checkpoint to run (default: the engine's, MANIFEST constraints.model)");
  cmd->add_option("--matrix", opts->matrix, "paper (prompts 11,256,1021 x gen 256,1024,2048) or quick (11,64 x 16,32)")->capture_default_str();
  cmd->add_option("--prompts", opts->prompts, "prompt lengths replacing the matrix's, e.g. 16,128")->delimiter(',');
  cmd->add_option("--gens", opts->gens, "generation lengths replacing the matrix's (each >= 2)")->delimiter(',');
  cmd->add_option("--runs", opts->runs, "measured runs per cell (mean +- stddev)")->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "unmeasured runs per cell before them")->capture_default_str();
  cmd->add_option("--threads", opts->threads, "engine threads (default: the engine's compiled threads, else every CPU)");
  cmd->add_option("--baseline-cmd", opts->baseline_cmd,
                  "another engine's command per cell, interleaved with ours; placeholders {prompt_tokens} {gen_tokens} {threads} "
                  "{model}; prints llama-bench JSON or a JSON object with metainfer's field names");
  cmd->add_option("--json", opts->json_file, "write the report as JSON to this file");
  cmd->add_option("--plot", opts->plot_file, "write an SVG chart (tokens/s per cell: ours, baseline, bound) to this file");
  cmd->add_flag("--no-supplementary", opts->no_supplementary, "skip the chunked-prefill and batch-scaling studies");
  cmd->add_option("--batch", opts->batch, "batch sizes of the batch-scaling study (default 1,2,4,8)")->delimiter(',');
  cmd->add_flag("--profile", opts->profile,
                "per-op profile of one decode step and one prefill (ENGINE bench --profile, with the measured limits)");
  cmd->add_option("--timeout", opts->timeout_s, "seconds allowed per engine or baseline run")->capture_default_str();
  cmd->add_option("--bandwidth-mib", opts->bandwidth_mib, "DRAM bandwidth probe buffer in MiB (>= 1024 for the bound)")->capture_default_str();
  cmd->add_option("-o,--out", opts->out, "with a constraints file: the engine directory (default engines/<name>)");
  cmd->add_option("--ckb", opts->ckb_dir, "CKB directory (with a constraints file)");
  cmd->callback([opts, &exit_code] {
    bench::BenchOptions bo;
    bo.matrix = bench::with_lengths(bench::matrix_named(opts->matrix), opts->prompts, opts->gens);
    if (opts->runs < 1) fail("--runs: expected an integer >= 1, got ", opts->runs);
    if (opts->warmup < 0) fail("--warmup: expected an integer >= 0, got ", opts->warmup);
    if (opts->threads < 0) fail("--threads: expected an integer >= 1, got ", opts->threads);
    if (opts->timeout_s <= 0) fail("--timeout: expected seconds > 0, got ", opts->timeout_s);
    if (opts->bandwidth_mib < 16) fail("--bandwidth-mib: expected >= 16, got ", opts->bandwidth_mib);
    check_output_path("--json", opts->json_file);
    check_output_path("--plot", opts->plot_file);
    std::error_code ec;
    if (!fs::exists(opts->target, ec)) fail("bench: '", opts->target, "' does not exist (expected an engine directory or a constraints file)");
    bo.engine_dir = fs::is_directory(opts->target, ec) ? fs::path(opts->target)
                                                       : engine_from_constraints(opts->target, opts->out, opts->ckb_dir, exit_code);
    bo.model = opts->model;
    bo.runs = opts->runs;
    bo.warmup = opts->warmup;
    bo.threads = opts->threads;
    bo.baseline_cmd = opts->baseline_cmd;
    bo.timeout_s = opts->timeout_s;
    bo.supplementary = !opts->no_supplementary;
    if (opts->batch.empty()) fail("--batch: give at least one batch size");
    for (int b : opts->batch)
      if (b < 1) fail("--batch: every batch size must be >= 1, got ", b);
    bo.batch_sizes = opts->batch;
    bo.profile = opts->profile;
    bo.dram_bytes = std::size_t(opts->bandwidth_mib) << 20;
    bo.progress = &std::cerr;
    nlohmann::json report;
    try {
      report = bench::run_bench(bo);
    } catch (const bench::EngineFailure&) {
      exit_code = kExitFailure;
      throw;
    }
    if (!opts->json_file.empty()) write_output("--json", opts->json_file, report.dump(2) + "\n");
    if (!opts->plot_file.empty()) write_output("--plot", opts->plot_file, bench::to_svg(report));
    std::cout << bench::to_markdown(report);
    exit_code = report["errors"].empty() ? kExitOk : kExitFailure;
  });
}

}  // namespace mi::cli
