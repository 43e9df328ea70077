// `metainfer bench` end to end on a tiny engine (qwen3-tiny, generated and built once): the quick matrix's report has
// every cell, every metric and every bound, in JSON, Markdown and SVG; --baseline-cmd with a stand-in that prints
// llama-bench-shaped JSON gives ratios; bad input exits 2. Shapes and signs only, never timings: the machine may be
// shared.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "../toolkit_support.h"
#include "generator/manifest.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

class BenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new mi_test::TempDir("bench");
    // max_batch 2: an engine generated for one sequence has no batched decode path to measure batch scaling with.
    const auto g = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--max-batch", "2", "--no-verify", "-o",
                              engine().string()});
    ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
    const auto b0 = metainfer({"verify", engine().string(), "--only", "B0"}, 1800);
    ASSERT_EQ(b0.exit_code, 0) << b0.out << b0.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path engine() { return *dir_ / "engine"; }
  static fs::path path(const std::string& name) { return *dir_ / name; }

  static json read_json(const fs::path& file) { return json::parse(mi::generator::read_file(file)); }

  static bool positive(const json& stat) {
    return stat.is_object() && stat["mean"].is_number() && std::isfinite(stat["mean"].get<double>()) && stat["mean"].get<double>() > 0 &&
           stat["stddev"].get<double>() >= 0 && stat["n"].get<int>() >= 1;
  }

  static mi_test::TempDir* dir_;
};
mi_test::TempDir* BenchCli::dir_ = nullptr;

TEST_F(BenchCli, QuickMatrixReportHasEveryCellMetricAndBound) {
  // One engine thread leaves the other core to the reading client, so token arrivals stay resolved on a busy machine.
  const auto r = metainfer({"bench", engine().string(), "--matrix", "quick", "--runs", "2", "--threads", "1", "--bandwidth-mib", "256", "--json",
                            path("quick.json").string(), "--plot", path("quick.svg").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json rep = read_json(path("quick.json"));
  EXPECT_EQ(rep["format"], "metainfer-bench/1");
  EXPECT_TRUE(rep["errors"].empty()) << rep["errors"].dump();
  EXPECT_EQ(rep["settings"]["matrix"], "quick");
  EXPECT_EQ(rep["settings"]["runs"], 2);

  // The machine's limits: positive, the best bandwidth at least every sample.
  const json& l = rep["limits"];
  EXPECT_GT(l["read_bandwidth_gbs"].get<double>(), 0);
  for (const json& s : l["read_bandwidth"]["samples"]) EXPECT_GE(l["read_bandwidth_gbs"].get<double>(), s["gbs"].get<double>());
  EXPECT_GE(l["decode_bandwidth_gbs"].get<double>(), l["read_bandwidth_gbs"].get<double>());
  EXPECT_GT(l["peak_gflops"]["f32_fma"]["gflops"].get<double>(), 0);
  EXPECT_GT(l["prefill_peak"]["gflops"].get<double>(), 0);
  // The prefill bound is the largest of the peaks measured at the start and after each of the 4 cells.
  EXPECT_EQ(l["prefill_peak"]["measurements"], 5);
  EXPECT_GE(l["prefill_peak"]["gflops"].get<double>(), l["prefill_peak"]["gflops_at_start"].get<double>());
  EXPECT_GT(rep["startup_ms"]["best"].get<double>(), 0);
  EXPECT_EQ(rep["ttft_origin"], "prompt_start_mark");
  EXPECT_EQ(rep["startup_ms"]["load_samples"].size(), rep["startup_ms"]["samples"].size());
  EXPECT_GT(rep["model"]["decode_weight_bytes_per_token"].get<double>(), 0);
  EXPECT_GT(rep["model"]["prompt_params_per_token"].get<double>(), 0);

  // Every cell of the quick matrix (2 x 2), each with every metric.
  ASSERT_EQ(rep["cells"].size(), 4u);
  std::set<std::pair<int, int>> seen;
  for (const json& c : rep["cells"]) {
    SCOPED_TRACE(c.dump());
    ASSERT_FALSE(c.contains("skipped"));
    EXPECT_TRUE(c["error"].is_null());
    seen.insert({c["prompt_tokens"].get<int>(), c["gen_tokens"].get<int>()});
    const json& m = c["metrics"];
    for (const char* k : {"tpot_ms", "latency_ms", "e2e_tok_s", "decode_tok_s", "tg_tok_s", "pg_tok_s", "peak_rss_mb"})
      EXPECT_TRUE(positive(m[k])) << k;
    // TTFT counts from each run's own prompt-start mark, so even a tiny model's short prompt has a prefill rate (it
    // used to sink into the noise of a start-up measured in other runs).
    for (const char* k : {"ttft_ms", "prefill_tok_s", "pp_tok_s"}) EXPECT_TRUE(positive(m[k])) << k;
    const int below = c["runs_ttft_below_startup_noise"].get<int>();
    EXPECT_EQ(below, 0);
    EXPECT_EQ(c["runs_decode_unresolved"], 0);
    EXPECT_EQ(c["runs"].size(), 2u);
    double ttft_sum_ms = 0;
    for (const json& run : c["runs"]) {
      EXPECT_EQ(run["tokens"], c["gen_tokens"]);
      ASSERT_TRUE(run["prompt_start_s"].is_number()) << run.dump();
      EXPECT_GT(run["prompt_start_s"].get<double>(), 0);
      EXPECT_LT(run["prompt_start_s"].get<double>(), run["first_token_s"].get<double>());
      ttft_sum_ms += (run["first_token_s"].get<double>() - run["prompt_start_s"].get<double>()) * 1e3;
    }
    // ...and the reported TTFT is measured from those marks.
    EXPECT_NEAR(m["ttft_ms"]["mean"].get<double>(), ttft_sum_ms / 2, 1e-6);
    for (const char* k : {"decode_tok_s", "prefill_tok_s", "tg_tok_s", "pp_tok_s"}) {
      EXPECT_TRUE(std::isfinite(c["bounds"][k].get<double>())) << k;
      EXPECT_GT(c["bounds"][k].get<double>(), 0) << k;
    }
    // The cell's bound: the larger of the read-bandwidth probes just before and just after it.
    const json& bw = c["bandwidth_gbs"];
    EXPECT_GT(bw["before"].get<double>(), 0);
    EXPECT_GT(bw["after"].get<double>(), 0);
    EXPECT_GE(bw["bound"].get<double>(), std::max(bw["before"].get<double>(), bw["after"].get<double>()));
    const double decode_fraction = c["fraction_of_bound"]["decode"].get<double>();
    EXPECT_GT(decode_fraction, 0);
    EXPECT_LE(decode_fraction, 1);
    EXPECT_GT(c["fraction_of_bound"]["prefill"].get<double>(), 0);
    // Every cell's prefill bound is the run's largest measured peak over 2 x the prompt parameters per token.
    const double largest_peak_bound = l["prefill_peak"]["gflops"].get<double>() * 1e9 /
                                      (2.0 * rep["model"]["prompt_params_per_token"].get<double>());
    EXPECT_NEAR(c["bounds"]["prefill_tok_s"].get<double>(), largest_peak_bound, 1e-9 * largest_peak_bound);
    EXPECT_NEAR(c["bounds"]["pp_tok_s"].get<double>(), largest_peak_bound, 1e-9 * largest_peak_bound);
    EXPECT_FALSE(c.contains("baseline"));
  }
  EXPECT_EQ(seen, (std::set<std::pair<int, int>>{{11, 16}, {11, 32}, {64, 16}, {64, 32}}));

  // llama-bench-style rows: pp per prompt length, tg per generation length.
  std::vector<std::string> tests;
  for (const json& row : rep["llama_bench"]) tests.push_back(row["test"]);
  EXPECT_EQ(tests, (std::vector<std::string>{"pp 11", "pp 64", "tg 16", "tg 32"}));
  // pp P as llama-bench times it: P tokens prefilled in one engine process after a warm-up prefill, --runs times; the
  // cell (P, shortest generation)'s fresh-process figure beside it.
  for (const json& row : rep["llama_bench"]) {
    SCOPED_TRACE(row.dump());
    if (row["test"].get<std::string>().rfind("pp ", 0) != 0) {
      EXPECT_FALSE(row.contains("source"));
      continue;
    }
    EXPECT_EQ(row["source"], "warm");
    const int p = std::stoi(row["test"].get<std::string>().substr(3));
    ASSERT_TRUE(row["warm"]["available"].get<bool>());
    EXPECT_TRUE(positive(row["tok_s"]));
    EXPECT_EQ(row["tok_s"]["n"], 2) << "one measurement per --runs";
    EXPECT_EQ(row["tok_s"], row["warm"]["metrics"]["prefill_tok_s"]);
    EXPECT_TRUE(positive(row["warm"]["metrics"]["ttft_ms"]));
    EXPECT_EQ(row["warm"]["warmup"], 1) << "at least one warm-up prefill, as llama-bench";
    EXPECT_EQ(row["warm"]["runs"], 2);
    EXPECT_NE(row["warm"]["source"].get<std::string>().find("after 1 warm-up"), std::string::npos);
    // P / prefill time, run by run, averaged: the engine's own runs reproduce the row's mean.
    ASSERT_EQ(row["warm"]["runs_ttft_ms"].size(), 2u);
    double rate_sum = 0;
    for (const json& t : row["warm"]["runs_ttft_ms"]) rate_sum += p / (t.get<double>() / 1e3);
    EXPECT_NEAR(row["tok_s"]["mean"].get<double>(), rate_sum / 2, 1e-6 * row["tok_s"]["mean"].get<double>());
    const json* cell = nullptr;
    for (const json& c : rep["cells"])
      if (c["prompt_tokens"] == p && c["gen_tokens"] == 16) cell = &c;
    ASSERT_NE(cell, nullptr);
    EXPECT_EQ(row["cold_tok_s"], (*cell)["metrics"]["pp_tok_s"]);
    EXPECT_NEAR(row["fraction_of_bound"].get<double>(),
                row["tok_s"]["mean"].get<double>() / row["bound_tok_s"].get<double>(), 1e-12);
  }
  EXPECT_NE(r.out.find("| warm |"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("pp 64 warm"), std::string::npos) << r.err;

  // Supplementary: chunked prefill at p = 64 (none, 16, 32).
  const json& sup = rep["supplementary"];
  EXPECT_EQ(sup["chunked_prefill"]["prompt_tokens"], 64);
  ASSERT_EQ(sup["chunked_prefill"]["rows"].size(), 3u);
  for (const json& row : sup["chunked_prefill"]["rows"]) {
    EXPECT_TRUE(row["error"].is_null()) << row.dump();
    for (const char* k : {"peak_rss_mb", "ttft_ms", "prefill_tok_s"}) EXPECT_TRUE(positive(row["metrics"][k])) << k << row.dump();
  }
  // Batch scaling from the engine's own bench: B = 1, 2, 4, 8 decoding together, each with an aggregate rate and a
  // speedup relative to B = 1 (exactly 1 there); shapes only, the rates depend on the machine.
  const json& batch = sup["batch_scaling"];
  ASSERT_EQ(batch["available"], true) << batch.dump();
  EXPECT_EQ(batch["prompt_tokens"], 11);
  EXPECT_EQ(batch["gen_tokens"], 16);
  ASSERT_EQ(batch["rows"].size(), 4u) << batch.dump();
  std::vector<int> sizes;
  for (const json& row : batch["rows"]) {
    SCOPED_TRACE(row.dump());
    sizes.push_back(row["batch"].get<int>());
    EXPECT_TRUE(positive(row["metrics"]["aggregate_tok_s"]));
    EXPECT_TRUE(positive(row["metrics"]["per_sequence_tok_s"]));
    EXPECT_TRUE(positive(row["metrics"]["step_ms"]));
    EXPECT_EQ(row["metrics"]["aggregate_tok_s"]["n"], 2);
    // aggregate = B x per-sequence, run by run, so also in the mean.
    EXPECT_NEAR(row["metrics"]["aggregate_tok_s"]["mean"].get<double>(),
                sizes.back() * row["metrics"]["per_sequence_tok_s"]["mean"].get<double>(),
                1e-9 * row["metrics"]["aggregate_tok_s"]["mean"].get<double>());
    EXPECT_GT(row["speedup"].get<double>(), 0);
  }
  EXPECT_EQ(sizes, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_DOUBLE_EQ(batch["rows"][0]["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(batch["rows"][0]["speedup_best"].get<double>(), 1.0);
  for (const json& row : batch["rows"])  // the best run is at least the mean
    EXPECT_GE(row["best_aggregate_tok_s"].get<double>(), row["metrics"]["aggregate_tok_s"]["mean"].get<double>() * (1 - 1e-12));
  EXPECT_NE(r.out.find("| 8 |"), std::string::npos) << r.out;

  // Markdown on stdout, progress on stderr, the SVG chart.
  EXPECT_NE(r.out.find("| prompt | gen | TTFT ms | TPOT ms |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("count from each run's prompt-start mark"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 64 | 32 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg 32 |"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ETA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cell 4/4"), std::string::npos) << r.err;
  const std::string svg = mi::generator::read_file(path("quick.svg"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("p64 n32"), std::string::npos);
  EXPECT_NE(svg.find("ours, warm (pp row)"), std::string::npos) << "the warm prefill beside the cells' cold one";
}

TEST_F(BenchCli, BaselineCommandWithLlamaBenchJsonGivesRatios) {
  // A stand-in for `llama-bench -p P -n N -t T -o json`: a pp test and a tg test of the cell's lengths.
  const std::string stand_in =
      "printf '[{\"model_type\":\"stand-in\",\"n_threads\":{threads},\"n_prompt\":{prompt_tokens},\"n_gen\":0,\"n_depth\":0,"
      "\"avg_ns\":1000000,\"stddev_ns\":0,\"avg_ts\":123.4,\"stddev_ts\":1.5,\"samples_ts\":[123.4]},"
      "{\"n_prompt\":0,\"n_gen\":{gen_tokens},\"n_depth\":0,\"avg_ts\":45.6,\"stddev_ts\":0.5}]'";
  const auto r = metainfer({"bench", engine().string(), "--matrix", "quick", "--prompts", "11,64", "--gens", "16", "--runs", "2", "--threads", "1",
                            "--no-supplementary", "--bandwidth-mib", "64", "--baseline-cmd", stand_in, "--json",
                            path("baseline.json").string(), "--plot", path("baseline.svg").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json rep = read_json(path("baseline.json"));
  ASSERT_EQ(rep["cells"].size(), 2u);
  for (const json& c : rep["cells"]) {
    SCOPED_TRACE(c.dump());
    ASSERT_TRUE(c.contains("baseline"));
    EXPECT_EQ(c["baseline"]["adapter"], "llama-bench");
    EXPECT_TRUE(c["baseline"]["notes"].empty());
    EXPECT_DOUBLE_EQ(c["baseline"]["metrics"]["pp_tok_s"]["mean"].get<double>(), 123.4);
    EXPECT_DOUBLE_EQ(c["baseline"]["metrics"]["tg_tok_s"]["mean"].get<double>(), 45.6);
    EXPECT_EQ(c["baseline"]["runs"].size(), 2u);
    // A ratio wherever both sides have the metric.
    for (const char* k : {"tg_tok_s", "decode_tok_s", "pp_tok_s", "prefill_tok_s"}) {
      EXPECT_EQ(c["ratio"].contains(k), c["metrics"][k].is_object()) << k;
      if (!c["ratio"].contains(k)) continue;
      const bool generation = k[0] == 't' || k[0] == 'd';  // tg / decode: the stand-in's tg test; pp / prefill: its pp test
      const double ours = c["metrics"][k]["mean"].get<double>(), theirs = generation ? 45.6 : 123.4;
      EXPECT_NEAR(c["ratio"][k].get<double>(), ours / theirs, 1e-9 * ours) << k;
    }
    EXPECT_GT(c["ratio"]["peak_rss_mb"].get<double>(), 0);
  }
  for (const json& row : rep["llama_bench"]) {
    SCOPED_TRACE(row.dump());
    EXPECT_TRUE(row.contains("baseline_tok_s"));
    // pp's ratio compares our warm prefill with the baseline's pp (llama-bench times its pp warm too).
    if (row["test"].get<std::string>().rfind("pp ", 0) == 0) {
      ASSERT_EQ(row["source"], "warm");
      EXPECT_EQ(row["ratio_basis"], "warm");
      EXPECT_NEAR(row["ratio"].get<double>(), row["tok_s"]["mean"].get<double>() / 123.4, 1e-9 * row["ratio"].get<double>());
      EXPECT_NEAR(row["cold_ratio"].get<double>(), row["cold_tok_s"]["mean"].get<double>() / 123.4, 1e-9 * row["cold_ratio"].get<double>());
    }
  }
  EXPECT_NE(r.out.find("## Baseline"), std::string::npos);
  EXPECT_NE(r.err.find("baseline"), std::string::npos) << "progress names the baseline runs";
  EXPECT_NE(mi::generator::read_file(path("baseline.svg")).find("baseline"), std::string::npos);

  // Our own field names; a failing baseline is a failure (exit 1) with the report still written.
  const auto own = metainfer({"bench", engine().string(), "--prompts", "11", "--gens", "16", "--runs", "1", "--threads", "1", "--no-supplementary",
                              "--bandwidth-mib", "64", "--baseline-cmd", "printf '{\"decode_tok_s\": 10, \"ttft_ms\": 5}'",
                              "--json", path("own.json").string()});
  ASSERT_EQ(own.exit_code, 0) << own.out << own.err;
  const json cell = read_json(path("own.json"))["cells"][0];
  EXPECT_EQ(cell["baseline"]["adapter"], "fields");
  // A command printing our field names may have timed a fresh process: its pp comparison stays cold against cold.
  const json pp_row = read_json(path("own.json"))["llama_bench"][0];
  EXPECT_EQ(pp_row["test"], "pp 11");
  EXPECT_EQ(pp_row["source"], "warm");
  EXPECT_EQ(pp_row["ratio_basis"], "cold");
  EXPECT_EQ(pp_row["ratio"], pp_row["cold_ratio"]);
  EXPECT_EQ(cell["ratio"].contains("decode_tok_s"), cell["metrics"]["decode_tok_s"].is_object());
  EXPECT_TRUE(cell["ratio"].contains("ttft_ms"));
  EXPECT_FALSE(cell["ratio"].contains("e2e_tok_s")) << "the stand-in does not give it";

  const auto bad = metainfer({"bench", engine().string(), "--prompts", "11", "--gens", "4", "--runs", "1", "--threads", "1", "--no-supplementary",
                              "--bandwidth-mib", "64", "--baseline-cmd", "echo not json", "--json", path("bad.json").string()});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_FALSE(read_json(path("bad.json"))["errors"].empty());
}

// An engine whose in-process bench cannot measure the warm prefill (here a wrapper that runs `generate` but refuses
// `bench`): the pp row falls back to the cell's cold-process figure, says so, and the run reports the failure.
TEST_F(BenchCli, PpRowFallsBackToTheColdFigureWhenTheWarmOneCannotBeMeasured) {
  const fs::path wrapped = path("no-self-bench");
  fs::create_directories(wrapped);
  for (const char* f : {"MANIFEST.json", "plan.json"}) fs::copy_file(engine() / f, wrapped / f);
  const std::string binary = read_json(engine() / "MANIFEST.json")["binary"].get<std::string>();
  fs::create_directories((wrapped / binary).parent_path());
  {
    std::ofstream script(wrapped / binary);
    script << "#!/bin/sh\nif [ \"$1\" = bench ]; then echo 'bench: not in this build' >&2; exit 3; fi\nexec '"
           << (engine() / binary).string() << "' \"$@\"\n";
  }
  fs::permissions(wrapped / binary, fs::perms::owner_all);
  const auto r = metainfer({"bench", wrapped.string(), "--model", golden("qwen3-tiny").string(), "--prompts", "11", "--gens", "4",
                            "--runs", "1", "--threads", "1", "--no-supplementary", "--bandwidth-mib", "64", "--json",
                            path("cold-pp.json").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json rep = read_json(path("cold-pp.json"));
  EXPECT_EQ(rep["errors"].size(), 1u) << "only the warm measurement failed: " << rep["errors"].dump();
  bool reported = false;
  for (const json& e : rep["errors"]) reported = reported || (e["cell"] == "pp 11 warm" && e["error"].dump().find("exit 3") != std::string::npos);
  EXPECT_TRUE(reported) << rep["errors"].dump();
  ASSERT_FALSE(rep["llama_bench"].empty());
  const json& pp = rep["llama_bench"][0];
  EXPECT_EQ(pp["test"], "pp 11");
  EXPECT_EQ(pp["source"], "cold");
  EXPECT_FALSE(pp.contains("warm"));
  EXPECT_TRUE(positive(pp["tok_s"])) << "the cold cell ran";
  EXPECT_EQ(pp["tok_s"], rep["cells"][0]["metrics"]["pp_tok_s"]);
  EXPECT_EQ(pp["cold_tok_s"], pp["tok_s"]);
}

// --profile: the engine's per-op profile of one decode step and one prefill, with the machine limits metainfer
// measured passed as the bounds: every op of the generated forward once, bytes and FLOPs, a fraction of bound.
TEST_F(BenchCli, ProfileListsEveryOpWithCostAndBound) {
  const auto r = metainfer({"bench", engine().string(), "--prompts", "11", "--gens", "4", "--runs", "1", "--warmup", "0", "--threads", "1",
                            "--no-supplementary", "--profile", "--bandwidth-mib", "64", "--json", path("profile.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json rep = read_json(path("profile.json"));
  EXPECT_TRUE(rep["errors"].empty()) << rep["errors"].dump();
  const json& prof = rep["profile"];
  ASSERT_TRUE(prof.is_object()) << rep.dump();
  const double bandwidth = rep["limits"]["decode_bandwidth_gbs"].get<double>();
  EXPECT_NEAR(prof["bandwidth_gbs"].get<double>(), bandwidth, 1e-5 * bandwidth) << "passed with 6 significant digits";
  EXPECT_GT(prof["peak_gflops"].get<double>(), 0);
  const std::set<std::string> expected = {"embed", "input_norm", "qkv_proj", "qk_norm", "rope", "attention", "o_proj",
                                          "residual_add", "post_attention_norm", "swiglu_mlp", "final_norm", "lm_head"};
  for (const char* phase : {"decode", "prefill"}) {
    SCOPED_TRACE(phase);
    const json& t = prof[phase];
    std::set<std::string> ops;
    double share = 0;
    for (const json& op : t["ops"]) {
      SCOPED_TRACE(op.dump());
      ops.insert(op["op"].get<std::string>());
      share += op["share"].get<double>();
      EXPECT_GE(op["ms"].get<double>(), 0);
      EXPECT_TRUE(op["fraction_of_bound"].is_number() || op["ms"].get<double>() == 0);
      if (op["op"] != "embed") {
        EXPECT_GT(op["flops"].get<double>(), 0);
      }
      EXPECT_GT(op["bytes"].get<double>(), 0);
    }
    EXPECT_EQ(ops, expected);
    EXPECT_NEAR(share, 1.0, 1e-9);
    EXPECT_GE(t["wall_ms"].get<double>(), 0.999 * t["ops_ms"].get<double>()) << "the ops run inside the step";
  }
  // The residual add runs twice per layer: twice the layers' calls of the one-per-layer ops.
  for (const json& op : prof["decode"]["ops"]) {
    if (op["op"] == "residual_add") {
      EXPECT_EQ(op["calls"].get<double>(), 2 * rep["model"]["layers"].get<double>()) << op.dump();
    }
  }
  EXPECT_NE(r.out.find("### Profile: one decode step"), std::string::npos) << r.out;
}

// Every input is checked before the engine's binary is needed, so a generated engine that is not built serves all rows.
TEST(BenchCliBadInput, Exits2) {
  const mi_test::TempDir dir("bench-bad");
  const fs::path unbuilt = dir / "unbuilt";
  const auto g = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--no-verify", "-o", unbuilt.string()});
  ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
  const std::string e = unbuilt.string();
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  auto path = [&](const std::string& name) { return dir / name; };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", e, "--matrix", "huge"}, "--matrix"},
      {{"bench", e, "--runs", "0"}, "--runs"},
      {{"bench", e, "--warmup", "-1"}, "--warmup"},
      {{"bench", e, "--gens", "1"}, "--gens"},
      {{"bench", e, "--prompts", "0"}, "--prompts"},
      {{"bench", e, "--runs", "x"}, "--runs"},
      {{"bench", e, "--baseline-cmd", "llama-bench -p {prompt}"}, "{prompt}"},
      {{"bench", e, "--json", (path("no-such-dir") / "r.json").string()}, "--json"},
      {{"bench", e, "--prompts", "600", "--gens", "16"}, "max_context"},
      {{"bench", e, "--model", path("no-such-model").string()}, "--model"},
      {{"bench", unbuilt.string()}, "--only B0"},
      {{"bench", empty.string()}, "MANIFEST.json"},
      {{"bench", path("missing").string()}, "does not exist"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = metainfer(args);
    EXPECT_EQ(r.exit_code, 2) << args[2] << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " in: " << r.err;
  }
}

TEST(PlatformBandwidth, BestOfPatternsInThePlatformCommand) {
  const auto r = metainfer({"platform", "--bandwidth", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j["read_bandwidth_gbs"].contains("threads_1"));
  const json& bw = j["read_bandwidth"];
  EXPECT_GT(bw["best_gbs"].get<double>(), 0);
  std::set<std::string> patterns;
  for (const json& s : bw["samples"]) {
    patterns.insert(s["pattern"].get<std::string>());
    EXPECT_GE(bw["best_gbs"].get<double>(), s["gbs"].get<double>());
  }
  EXPECT_EQ(patterns, (std::set<std::string>{"stream1", "stream1-nopf", "stream4", "stream4-nopf", "stream8", "stream8-nopf"}));
  for (const auto& [k, v] : j["read_bandwidth_gbs"].items()) EXPECT_LE(v.get<double>(), bw["best_gbs"].get<double>()) << k;
}

}  // namespace
