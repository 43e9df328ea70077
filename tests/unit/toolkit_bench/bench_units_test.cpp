// The parts of `metainfer bench` that need no engine: the machine-limit probes, the workload matrix and statistics,
// the baseline adapters, the token clock of an id stream and the streaming subprocess runner.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/baseline.h"
#include "bench/engine_runner.h"
#include "bench/machine_limits.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "common/error.h"
#include "generator/manifest.h"
#include "platform/bandwidth.h"
#include "platform/cpu_info.h"
#include "prompts/token_prompts.h"
#include "process/streaming.h"
#include "../toolkit_support.h"

namespace {
using namespace mi::bench;
using nlohmann::json;

TEST(MachineLimits, BandwidthIsTheBestOfEveryPatternAndThreadCount) {
  mi::platform::BandwidthOptions o;
  o.bytes = std::size_t(64) << 20;
  o.thread_counts = {1, 2};
  o.passes = 2;
  const mi::platform::ReadBandwidth bw = mi::platform::probe_read_bandwidth(o);
  ASSERT_EQ(bw.samples.size(), mi::platform::read_patterns().size() * 2);
  EXPECT_GT(bw.best_gbs, 0);
  EXPECT_TRUE(bw.isa == "avx512" || bw.isa == "avx2" || bw.isa == "sse2") << bw.isa;
  for (const auto& s : bw.samples) {
    EXPECT_TRUE(std::isfinite(s.gbs) && s.gbs > 0) << s.pattern << " " << s.threads;
    EXPECT_GE(bw.best_gbs, s.gbs) << s.pattern << " " << s.threads;
    EXPECT_GE(bw.best_at(s.threads), s.gbs);
  }
  bool found = false;
  for (const auto& s : bw.samples) found = found || (s.pattern == bw.best_pattern && s.threads == bw.best_threads && s.gbs == bw.best_gbs);
  EXPECT_TRUE(found) << "the best is one of the samples";
  const json j = bw.to_json();
  EXPECT_EQ(j["samples"].size(), bw.samples.size());
  EXPECT_EQ(j["best_pattern"], bw.best_pattern);
}

TEST(MachineLimits, CompatibleSingleFigureAndBadArguments) {
  EXPECT_GT(mi::platform::measure_read_bandwidth_gbs(1, std::size_t(32) << 20), 0);
  EXPECT_THROW(mi::platform::measure_read_bandwidth_gbs(0), mi::Error);
  EXPECT_THROW(mi::platform::measure_read_bandwidth_gbs(4, std::size_t(1) << 20), mi::Error);
}

TEST(MachineLimits, ThreadLadder) {
  EXPECT_EQ(mi::platform::thread_ladder(1), (std::vector<int>{1}));
  EXPECT_EQ(mi::platform::thread_ladder(4), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(mi::platform::thread_ladder(16), (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16}));
  EXPECT_EQ(mi::platform::thread_ladder(20), (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16, 20}));
}

TEST(MachineLimits, PeakFlopsArePositive) {
  const PeakFlops f32 = measure_f32_fma(2, 2);
  EXPECT_EQ(f32.format, "f32_fma");
  EXPECT_GT(f32.gflops_1, 0);
  EXPECT_GE(f32.gflops, f32.gflops_1);
  const auto bf16 = measure_bf16_dot(2, 2);
  EXPECT_EQ(bf16.has_value(), mi::platform::detect_cpu().avx512_bf16);
  if (bf16) {
    EXPECT_GT(bf16->gflops, 0);
  }

  const auto tile = measure_bf16_tile(2, 2);
  const auto cpu = mi::platform::detect_cpu();
  EXPECT_EQ(tile.has_value(), cpu.amx_tile && cpu.amx_bf16);
  if (tile) {
    EXPECT_EQ(tile->format, "bf16_tile");
    EXPECT_GT(tile->gflops, f32.gflops) << "one TDPBF16PS does 16384 FLOP";
  }

  MachineLimits m;
  m.f32 = f32;
  m.bf16 = bf16;
  m.bf16_tile = tile;
  m.dram.best_gbs = 10;
  EXPECT_EQ(m.decode_bandwidth_gbs(), 10);
  m.working_set = m.dram;
  m.working_set->best_gbs = 100;
  EXPECT_EQ(m.decode_bandwidth_gbs(), 100);
  const PeakFlops& p = m.prefill_peak("bf16");
  EXPECT_GE(p.gflops, f32.gflops) << "the prefill bound is the larger peak";
  if (bf16) {
    EXPECT_GE(p.gflops, bf16->gflops);
  }
  if (tile) {
    EXPECT_EQ(p.format, "bf16_tile");
  }
  EXPECT_EQ(m.prefill_peak("f32").format, "f32_fma");

  // Measured again: the same format and thread count; an unknown format is an error, not a silent f32 figure.
  const PeakFlops again = measure_peak_again(f32, 2);
  EXPECT_EQ(again.format, "f32_fma");
  EXPECT_EQ(again.threads, f32.threads);
  EXPECT_GT(again.gflops, 0);
  PeakFlops bogus = f32;
  bogus.format = "int4_magic";
  EXPECT_THROW(measure_peak_again(bogus, 1), mi::Error);
}

TEST(Workload, Matrices) {
  const Matrix paper = matrix_named("paper");
  EXPECT_EQ(paper.prompts, (std::vector<int>{11, 256, 1021}));
  EXPECT_EQ(paper.gens, (std::vector<int>{256, 1024, 2048}));
  EXPECT_EQ(paper.cells().size(), 9u);
  EXPECT_EQ(paper.chunk_prompt, 1021);
  EXPECT_EQ(paper.prefill_chunks, (std::vector<int>{128, 256, 512}));
  EXPECT_EQ(matrix_named("quick").cells().size(), 4u);
  EXPECT_THROW(matrix_named("huge"), mi::Error);
  const Matrix m = with_lengths(matrix_named("quick"), {32, 8, 32}, {4});
  EXPECT_EQ(m.prompts, (std::vector<int>{8, 32}));
  EXPECT_EQ(m.gens, (std::vector<int>{4}));
  EXPECT_EQ(m.chunk_prompt, 32);
  EXPECT_THROW(with_lengths(m, {0}, {}), mi::Error);
  EXPECT_THROW(with_lengths(m, {}, {1}), mi::Error);
}

TEST(Workload, PromptIdsAreDeterministicAndInVocabulary) {
  const auto a = mi::prompts::golden_prompt(0, 100, 512), b = mi::prompts::golden_prompt(0, 100, 512);
  EXPECT_EQ(a, b);
  for (int id : a) EXPECT_TRUE(id >= 1 && id < 512) << id;
  EXPECT_EQ(mi::prompts::ids_text({1, 22, 3}), "1,22,3");
}

TEST(Workload, MeanAndSampleStddev) {
  const Stat s = summarize({2, 4, 4, 4, 5, 5, 7, 9, NAN});
  EXPECT_EQ(s.n, 8);
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, std::sqrt(32.0 / 7), 1e-12);
  EXPECT_EQ(summarize({3}).stddev, 0);
  EXPECT_TRUE(summarize({}).to_json().is_null());
  EXPECT_EQ(format_stat(s.to_json()), "5.00 ± 2.14");
}

TEST(Baseline, LlamaBenchJsonArray) {
  const std::string out = R"([
    {"model_type": "qwen3 ?B BF16", "n_threads": 2, "n_prompt": 64, "n_gen": 0, "n_depth": 0, "avg_ns": 1000, "stddev_ns": 10,
     "avg_ts": 640.5, "stddev_ts": 2.5, "samples_ts": [640, 641]},
    {"n_prompt": 0, "n_gen": 16, "n_depth": 0, "avg_ts": 55.25, "stddev_ts": 0.5}
  ])";
  const BaselineSample s = parse_baseline_output(out, {64, 16});
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.adapter, "llama-bench");
  EXPECT_DOUBLE_EQ(s.metrics.at("pp_tok_s"), 640.5);
  EXPECT_DOUBLE_EQ(s.metrics.at("prefill_tok_s"), 640.5);
  EXPECT_DOUBLE_EQ(s.metrics.at("tg_tok_s"), 55.25);
  EXPECT_DOUBLE_EQ(s.metrics.at("decode_tok_s"), 55.25);
  EXPECT_DOUBLE_EQ(s.reported_stddev.at("pp_tok_s"), 2.5);
  EXPECT_FALSE(s.metrics.count("pp_tok_s_stddev"));
  EXPECT_TRUE(s.notes.empty());
}

TEST(Baseline, LlamaBenchJsonLinesPicksTheMatchingTestAndNotesMismatches) {
  const std::string out =
      "{\"n_prompt\": 512, \"n_gen\": 0, \"avg_ts\": 1.0, \"stddev_ts\": 0}\n"
      "{\"n_prompt\": 11, \"n_gen\": 0, \"avg_ts\": 2.0, \"stddev_ts\": 0}\n"
      "{\"n_prompt\": 0, \"n_gen\": 128, \"avg_ts\": 3.0, \"stddev_ts\": 0}\n";
  const BaselineSample s = parse_baseline_output(out, {11, 16});
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_DOUBLE_EQ(s.metrics.at("pp_tok_s"), 2.0);
  EXPECT_DOUBLE_EQ(s.metrics.at("tg_tok_s"), 3.0);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("n_gen 128"), std::string::npos) << s.notes[0];
}

TEST(Baseline, OwnFieldNamesAndBadOutput) {
  const BaselineSample s = parse_baseline_output("loading...\n{\"ttft_ms\": 12.5, \"decode_tok_s\": 40, \"other\": 1}\n", {11, 16});
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.adapter, "fields");
  EXPECT_DOUBLE_EQ(s.metrics.at("ttft_ms"), 12.5);
  EXPECT_DOUBLE_EQ(s.metrics.at("tg_tok_s"), 40);
  EXPECT_FALSE(s.metrics.count("other"));
  EXPECT_FALSE(parse_baseline_output("no json here", {1, 2}).error.empty());
  EXPECT_FALSE(parse_baseline_output("{\"unrelated\": 1}", {1, 2}).error.empty());
  EXPECT_FALSE(parse_baseline_output("[{\"n_prompt\": 0, \"n_gen\": 0, \"avg_ts\": 1}]", {1, 2}).error.empty());
}

TEST(Baseline, Placeholders) {
  EXPECT_EQ(expand_baseline_command("b -p {prompt_tokens} -n {gen_tokens} -t {threads} -m {model} '{\"x\":1}'", {11, 16}, 4, "/m"),
            "b -p 11 -n 16 -t 4 -m /m '{\"x\":1}'");
  EXPECT_THROW(expand_baseline_command("b -p {prompt}", {11, 16}, 4, "/m"), mi::Error);
  const BaselineSample s = run_baseline("printf '{\"decode_tok_s\": {gen_tokens}}'", {11, 16}, 1, "/m", 30);
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_DOUBLE_EQ(s.metrics.at("decode_tok_s"), 16);
  EXPECT_GT(s.metrics.at("peak_rss_mb"), 0);
  EXPECT_FALSE(run_baseline("exit 3", {11, 16}, 1, "/m", 30).error.empty());
}

TEST(EngineRunner, IdStreamClockCountsTokensAcrossChunks) {
  IdStreamClock c;
  c.feed(1.0, "12");
  c.feed(2.0, "3,4");  // "123" continues, "4" starts at 2.0
  c.feed(3.0, ",");
  c.feed(4.0, "5,6\n7");  // nothing after the newline counts
  EXPECT_EQ(c.arrivals(), (std::vector<double>{1.0, 2.0, 4.0, 4.0}));
}

TEST(EngineRunner, IdStreamClockTakesAnAtBeforeTheFirstIdAsThePromptStart) {
  IdStreamClock c;
  EXPECT_LT(c.prompt_start(), 0);
  c.feed(0.5, "@");
  c.feed(0.9, "7");
  c.feed(1.0, "@,8\n");  // an '@' after the first id is not a mark
  EXPECT_DOUBLE_EQ(c.prompt_start(), 0.5);
  EXPECT_EQ(c.arrivals(), (std::vector<double>{0.9, 1.0}));
  IdStreamClock late;
  late.feed(1.0, "3,");
  late.feed(2.0, "@4\n");
  EXPECT_LT(late.prompt_start(), 0);
  EXPECT_EQ(late.arrivals(), (std::vector<double>{1.0, 2.0}));
}

// Stand-in engines (shell scripts) for the runner's handling of the prompt-start mark: one that writes it, an older
// one whose command line rejects the flag (the runner retries without it, for good), and one that accepts the flag
// but writes no mark (an error, not a silently different TTFT).
TEST(EngineRunner, PromptStartMarkAndTheFallbackForEnginesWithoutIt) {
  mi_test::TempDir dir("runner");
  const auto checkpoint = dir.path() / "ckpt";
  std::filesystem::create_directories(checkpoint);
  mi::generator::write_file(checkpoint / "config.json", "{\"vocab_size\": 100, \"eos_token_id\": 2}\n");
  const auto script = [&](const std::string& name, const std::string& body) {
    const auto p = dir.path() / name;
    mi::generator::write_file(p, "#!/bin/sh\n" + body);
    std::filesystem::permissions(p, std::filesystem::perms::owner_all);
    return p;
  };
  const std::string has_flag = "case \" $* \" in *' --mark-prompt-start '*) F=1;; *) F=0;; esac\n";
  {
    EngineRunner runner(script("marks", has_flag + "[ $F = 1 ] && printf @ && sleep 0.2\nprintf 5; printf ,6; echo\n"),
                        checkpoint, 1, 100);
    const EngineRun r = runner.run(3, 2);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(runner.mark_prompt_start());
    ASSERT_EQ(r.arrivals_s.size(), 2u);
    EXPECT_GE(r.prompt_start_s, 0);
    EXPECT_GE(r.arrivals_s.front() - r.prompt_start_s, 0.15);
  }
  {
    EngineRunner runner(script("old", has_flag +
                                          "if [ $F = 1 ]; then echo 'The following argument was not expected: "
                                          "--mark-prompt-start' >&2; exit 109; fi\nprintf 5,6; echo\n"),
                        checkpoint, 1, 100);
    const EngineRun r = runner.run(3, 2);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_FALSE(runner.mark_prompt_start());
    EXPECT_LT(r.prompt_start_s, 0);
    EXPECT_EQ(r.arrivals_s.size(), 2u);
    EXPECT_EQ(r.command.find("--mark-prompt-start"), std::string::npos) << r.command;
  }
  {
    EngineRunner runner(script("silent", "printf 5,6; echo\n"), checkpoint, 1, 100);
    const EngineRun r = runner.run(3, 2);
    EXPECT_NE(r.error.find("no '@'"), std::string::npos) << r.error;
  }
}

TEST(Streaming, ArrivalTimesAndExitStatus) {
  std::vector<std::pair<double, std::string>> chunks;
  const auto r = mi::process::run_streaming({"/bin/sh", "-c", "printf 1; sleep 0.2; printf ,2; echo err >&2; exit 4"},
                                            [&](double t, std::string_view s) { chunks.emplace_back(t, std::string(s)); });
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.out, "1,2");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_GT(r.peak_rss_kb, 0);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_GE(chunks.back().first - chunks.front().first, 0.15);
  const auto t = mi::process::run_streaming({"/bin/sleep", "5"}, nullptr, {.timeout_s = 0.3});
  EXPECT_TRUE(t.timed_out);
}

}  // namespace
