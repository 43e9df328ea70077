// `ENGINE bench` in-process on the test model (golden qwen3-tiny, scalar kernels): the report's shape and field
// names (the cell metrics of `metainfer bench`), batch-scaling rows, the chunked-prefill rows, and bad input (exit 2
// naming the flag). Shapes and relations only, never timings.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

namespace fs = std::filesystem;
using mi_test::CliRun;
using mi_test::run_cli;
using mi_test::test_engine_info;
using nlohmann::json;

const fs::path kGolden = fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny";

bool positive(const json& stat) {
  return stat.is_object() && stat["mean"].is_number() && stat["mean"].get<double>() > 0 && stat["stddev"].get<double>() >= 0 &&
         stat["n"].get<int>() >= 1;
}

TEST(EngineBench, ReportHasCellsBatchRowsAndChunkRows) {
  const CliRun r = run_cli(test_engine_info(), {"bench", "--model", kGolden.string(), "--matrix", "quick", "--prompts", "5,9",
                                                "--gens", "3", "--runs", "2", "--warmup", "0", "--batch", "1,2,3",
                                                "--batch-gen", "3", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json rep = json::parse(r.out);
  EXPECT_EQ(rep["format"], "metainfer-bench/1");
  EXPECT_EQ(rep["source"], "engine");
  EXPECT_TRUE(rep["errors"].empty());
  ASSERT_EQ(rep["cells"].size(), 2u);
  for (const json& c : rep["cells"]) {
    SCOPED_TRACE(c.dump());
    for (const char* k : {"ttft_ms", "tpot_ms", "latency_ms", "e2e_tok_s", "decode_tok_s", "prefill_tok_s", "pp_tok_s", "tg_tok_s",
                          "pg_tok_s", "peak_rss_mb"})
      EXPECT_TRUE(positive(c["metrics"][k])) << k;
    EXPECT_EQ(c["metrics"]["ttft_ms"]["n"], 2);
    EXPECT_EQ(c["runs"].size(), 2u);
    // TPOT = (latency - TTFT) / (n - 1), run by run.
    for (const json& run : c["runs"]) EXPECT_GE(run["latency_ms"].get<double>(), run["ttft_ms"].get<double>());
  }
  std::vector<std::string> tests;
  for (const json& row : rep["llama_bench"]) tests.push_back(row["test"]);
  EXPECT_EQ(tests, (std::vector<std::string>{"pp 5", "pp 9", "tg 3"}));

  const json& batch = rep["supplementary"]["batch_scaling"];
  EXPECT_EQ(batch["available"], true);
  EXPECT_EQ(batch["prompt_tokens"], 5);
  EXPECT_EQ(batch["gen_tokens"], 3);
  ASSERT_EQ(batch["rows"].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const json& row = batch["rows"][i];
    EXPECT_EQ(row["batch"], int(i) + 1);
    EXPECT_TRUE(positive(row["metrics"]["aggregate_tok_s"]));
    EXPECT_GT(row["speedup"].get<double>(), 0);
  }
  EXPECT_DOUBLE_EQ(batch["rows"][0]["speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(batch["rows"][0]["speedup_best"].get<double>(), 1.0);
  // Sizes take turns run by run: the progress lines alternate B=1, B=2, B=3.
  const std::size_t first_b3 = r.err.find("batch scaling B=3"), second_b1 = r.err.find("batch scaling B=1 run 2/2");
  ASSERT_NE(first_b3, std::string::npos) << r.err;
  ASSERT_NE(second_b1, std::string::npos) << r.err;
  EXPECT_LT(first_b3, second_b1) << r.err;

  // Chunked prefill at the largest prompt (9): none, then the quick matrix's chunks below it (none of 16, 32).
  const json& chunked = rep["supplementary"]["chunked_prefill"];
  EXPECT_EQ(chunked["prompt_tokens"], 9);
  ASSERT_EQ(chunked["rows"].size(), 1u);
  EXPECT_TRUE(positive(chunked["rows"][0]["metrics"]["ttft_ms"]));
}

TEST(EngineBench, JsonFileAndPartsSelectWhatRuns) {
  const fs::path file = fs::temp_directory_path() / ("mi_engine_bench_" + std::to_string(::getpid()) + ".json");
  const CliRun r = run_cli(test_engine_info(), {"bench", "--model", kGolden.string(), "--parts", "batch", "--batch", "2",
                                                "--batch-prompt", "4", "--batch-gen", "2", "--runs", "1", "--warmup", "0",
                                                "--json", file.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(file);
  const json rep = json::parse(in);
  fs::remove(file);
  EXPECT_TRUE(rep["cells"].empty());
  EXPECT_FALSE(rep["supplementary"].contains("chunked_prefill"));
  ASSERT_EQ(rep["supplementary"]["batch_scaling"]["rows"].size(), 1u);
  // No B = 1 row: no speedup to give.
  EXPECT_TRUE(rep["supplementary"]["batch_scaling"]["rows"][0]["speedup"].is_null());
  EXPECT_NE(r.err.find("batch scaling B=2"), std::string::npos) << "progress on the error stream";
}

TEST(EngineBench, TheTestModelHasNoProfilerAndSaysSo) {
  const CliRun r = run_cli(test_engine_info(), {"bench", "--model", kGolden.string(), "--parts", "profile", "--profile-prompt", "8"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("no op profiler"), std::string::npos) << r.err;
}

TEST(EngineBench, BadInputExitsTwoNamingTheFlag) {
  const std::string m = kGolden.string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", "--model", m, "--matrix", "huge"}, "--matrix"},
      {{"bench", "--model", m, "--runs", "0"}, "--runs"},
      {{"bench", "--model", m, "--warmup", "-1"}, "--warmup"},
      {{"bench", "--model", m, "--gens", "1"}, "--gens"},
      {{"bench", "--model", m, "--prompts", "0"}, "--prompts"},
      {{"bench", "--model", m, "--prompts", "x"}, "--prompts"},
      {{"bench", "--model", m, "--batch", "0"}, "--batch"},
      {{"bench", "--model", m, "--batch", "1,8", "--max-batch", "4"}, "--max-batch"},
      {{"bench", "--model", m, "--parts", "matrix,speed"}, "--parts"},
      {{"bench", "--model", m, "--batch-gen", "1"}, "--batch-gen"},
      {{"bench", "--model", m, "--batch-prompt", "250", "--batch-gen", "10"}, "max_context"},
      {{"bench", "--model", m, "--profile", "--profile-prompt", "256"}, "--profile-prompt"},
      {{"bench", "--model", m, "--bandwidth-gbs", "-1"}, "--bandwidth-gbs"},
      {{"bench", "--model", m, "--threads", "0"}, "--threads"},
      {{"bench", "--model", m, "--json", "/nonexistent-dir/r.json"}, "--json"},
      {{"bench", "--model", "/nonexistent-checkpoint"}, "--model"},
  };
  for (const auto& [args, expect] : cases) {
    const CliRun r = run_cli(test_engine_info(), args);
    EXPECT_EQ(r.code, 2) << args.back() << "\n" << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "expected '" << expect << "' in: " << r.err;
  }
}

}  // namespace
