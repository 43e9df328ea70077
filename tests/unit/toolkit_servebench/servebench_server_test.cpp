// serve-bench against an in-process fake OpenAI server on 127.0.0.1 (fake_openai_server.h): the timings fall in
// generous ranges around the planned delays (the machine is shared: lower bounds only where causality guarantees
// them, upper bounds loose), counts are exact, events split across reads parse, failures are counted with their
// message, the deadline and the per-request timeout bound the run, and the JSON report has its fields.
#include <gtest/gtest.h>

#include "fake_openai_server.h"
#include "servebench/load_run.h"
#include "servebench/model_list.h"
#include "servebench/serving_report.h"
#include "servebench/sse_client.h"

namespace {
using namespace mi::servebench;
using mi_test::FakeOpenAiServer;
using mi_test::FakePlan;

Workload workload_for(const FakeOpenAiServer& server) {
  Workload w;
  w.url = parse_loopback_url(server.url());
  w.model = "fake-model";
  w.prompt_text = "the of and";
  w.max_tokens = 5;
  w.timeout_s = 30;
  return w;
}

Clock::time_point in_seconds(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(ServeBenchServer, ModelListFirstId) {
  FakeOpenAiServer server({});
  EXPECT_EQ(list_models(parse_loopback_url(server.url()), 10), (std::vector<std::string>{"fake-model", "other"}));
}

TEST(ServeBenchServer, TimingsMatchThePlannedDelays) {
  FakeOpenAiServer server({.first_delay_ms = 50, .gap_ms = 10, .tokens = 5});
  const Workload w = workload_for(server);
  const LevelRun run = run_level(w, 2, 4, in_seconds(120));
  EXPECT_EQ(server.requests(), 4);
  EXPECT_EQ(server.last_body()["stream"], true);
  EXPECT_EQ(server.last_body()["stream_options"]["include_usage"], true);
  ASSERT_EQ(run.results.size(), 4u);
  EXPECT_EQ(run.requests_sent, 4);
  EXPECT_FALSE(run.deadline_reached);
  for (const RequestResult& r : run.results) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.content_chunks, 5);
    EXPECT_EQ(r.usage_completion_tokens, 5);
    EXPECT_EQ(r.usage_prompt_tokens, 7);
    // The first content is written 50 ms after the request arrives (the empty chunk at 0 ms does not count), and
    // the last 4 gaps of 10 ms later: neither can be seen sooner.
    EXPECT_GE(r.ttft_s, 0.045);
    EXPECT_LT(r.ttft_s, 5.0);
    EXPECT_GE(r.latency_s, 0.085);
    EXPECT_LT(r.latency_s, 10.0);
    ASSERT_EQ(r.itl_s.size(), 4u);
    double sum = 0;
    for (double g : r.itl_s) {
      EXPECT_GE(g, 0);
      EXPECT_LT(g, 2.0);
      sum += g;
    }
    EXPECT_NEAR(sum, r.latency_s - r.ttft_s, 1e-9);  // the gaps tile the stream from first to last content
    ASSERT_TRUE(r.tpot_s());
    EXPECT_NEAR(*r.tpot_s(), (r.latency_s - r.ttft_s) / 4, 1e-12);
    EXPECT_LT(*r.tpot_s(), 2.0);
  }
  const nlohmann::json l = level_report(run);
  EXPECT_EQ(l["completed"], 4);
  EXPECT_EQ(l["failed"], 0);
  EXPECT_EQ(l["total_output_tokens"], 20);
  EXPECT_EQ(l["total_prompt_tokens"], 28);
  EXPECT_EQ(l["output_tokens_source"], "usage");
  EXPECT_EQ(l["itl_ms"]["n"], 16);
  EXPECT_EQ(l["tpot_ms"]["n"], 4);
  EXPECT_GE(l["ttft_ms"]["median"].get<double>(), 45);
  EXPECT_GE(l["e2e_ms"]["p99"].get<double>(), l["e2e_ms"]["median"].get<double>());
  EXPECT_GT(l["duration_s"].get<double>(), 0.085 * 2);  // two requests per worker, one after the other
  EXPECT_NEAR(l["request_throughput_rps"].get<double>(), 4 / l["duration_s"].get<double>(), 1e-9);
  EXPECT_NEAR(l["output_token_throughput_tps"].get<double>(), 20 / l["duration_s"].get<double>(), 1e-9);
  EXPECT_TRUE(l["errors"].empty());
  EXPECT_TRUE(l["first_error"].is_null());
  EXPECT_TRUE(l["server"].is_null()) << "this server exports no engine counters";
}

// A metainfer engine's /metrics counters are read around the level: the report holds their differences (the decode
// passes' own throughput and batch) and the Markdown a table of them.
TEST(ServeBenchServer, EngineCountersAroundTheLevel) {
  FakeOpenAiServer server({.first_delay_ms = 5, .gap_ms = 2, .tokens = 5, .engine_metrics = true});
  const Workload w = workload_for(server);
  run_level(w, 1, 2, in_seconds(120));  // counters already past zero when the measured level starts
  const LevelRun run = run_level(w, 2, 4, in_seconds(120));
  const nlohmann::json l = level_report(run);
  ASSERT_TRUE(l["server"].is_object()) << l.dump(1);
  EXPECT_DOUBLE_EQ(l["server"]["decode_tokens"].get<double>(), 16);
  EXPECT_DOUBLE_EQ(l["server"]["decode_steps"].get<double>(), 16);
  EXPECT_NEAR(l["server"]["decode_s"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(l["server"]["decode_tok_s"].get<double>(), 8.0, 1e-9);
  EXPECT_NEAR(l["server"]["mean_decode_batch"].get<double>(), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(l["server"]["prefill_tokens"].get<double>(), 28);
  EXPECT_NEAR(l["server"]["prefill_tok_s"].get<double>(), 70.0, 1e-9);
  const std::string md = to_markdown(make_report(w, 120, {run}));
  EXPECT_NE(md.find("| 2 | 8.00 | 1.00 | 16 | 2.000 | 70.00 | 28 |"), std::string::npos) << md;
}

TEST(ServeBenchServer, EventsSplitAcrossReadsAndChat) {
  FakeOpenAiServer server({.first_delay_ms = 20, .gap_ms = 5, .tokens = 4, .split_events = true});
  Workload w = workload_for(server);
  w.endpoint = Endpoint::chat;
  const LevelRun run = run_level(w, 1, 2, in_seconds(120));
  ASSERT_EQ(run.results.size(), 2u);
  for (const RequestResult& r : run.results) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.content_chunks, 4);  // the role chunk (empty content) is not content
    EXPECT_EQ(r.output_tokens(), 4);
    EXPECT_TRUE(r.done);
    EXPECT_GE(r.ttft_s, 0.015);
  }
  EXPECT_TRUE(server.last_body().contains("messages"));
}

TEST(ServeBenchServer, ErrorStatusAndStreamErrorsCountAsFailures) {
  {
    FakeOpenAiServer server({.status = 503});
    const LevelRun run = run_level(workload_for(server), 2, 4, in_seconds(120));
    const nlohmann::json l = level_report(run);
    EXPECT_EQ(l["completed"], 0);
    EXPECT_EQ(l["failed"], 4);
    EXPECT_EQ(l["first_error"], "HTTP 503: fake overload");
    ASSERT_EQ(l["errors"].size(), 1u);
    EXPECT_EQ(l["errors"][0]["count"], 4);
    EXPECT_TRUE(l["ttft_ms"]["mean"].is_null());
    EXPECT_TRUE(l["output_tokens_source"].is_null());
    EXPECT_EQ(run.results[0].http_status, 503);
  }
  {
    FakeOpenAiServer server({.first_delay_ms = 5, .gap_ms = 1, .tokens = 3, .fail_every = 2});
    const nlohmann::json l = level_report(run_level(workload_for(server), 1, 4, in_seconds(120)));
    EXPECT_EQ(l["completed"], 2);
    EXPECT_EQ(l["failed"], 2);
    EXPECT_EQ(l["first_error"], "HTTP 500: fake overload");
    EXPECT_EQ(l["total_output_tokens"], 6);
  }
  {
    FakeOpenAiServer server({.first_delay_ms = 5, .gap_ms = 1, .tokens = 3, .error_in_stream = true});
    const nlohmann::json l = level_report(run_level(workload_for(server), 1, 2, in_seconds(120)));
    EXPECT_EQ(l["failed"], 2);
    EXPECT_EQ(l["first_error"], "error in stream: fake engine crash");
  }
}

TEST(ServeBenchServer, NoUsageFallsBackToContentChunksAndSaysSo) {
  FakeOpenAiServer server({.first_delay_ms = 5, .gap_ms = 2, .tokens = 3, .usage = false});
  const Workload w = workload_for(server);
  const nlohmann::json rep = make_report(w, 60, {run_level(w, 1, 2, in_seconds(120))});
  const nlohmann::json& l = rep["levels"][0];
  EXPECT_EQ(l["completed"], 2);
  EXPECT_EQ(l["output_tokens_source"], "content_chunks");
  EXPECT_EQ(l["requests_without_usage"], 2);
  EXPECT_EQ(l["total_output_tokens"], 6);
  EXPECT_TRUE(l["total_prompt_tokens"].is_null());
  ASSERT_EQ(rep["notes"].size(), 1u);
  EXPECT_NE(rep["notes"][0].get<std::string>().find("content chunks"), std::string::npos);
  EXPECT_NE(to_markdown(rep).find("content chunks"), std::string::npos);
}

TEST(ServeBenchServer, TimeoutDeadlineAndRefusedConnectionAreBounded) {
  {
    FakeOpenAiServer server({.first_delay_ms = 5000});  // stalls far past the request timeout
    Workload w = workload_for(server);
    w.timeout_s = 0.3;
    const auto t0 = Clock::now();
    const LevelRun run = run_level(w, 1, 1, in_seconds(120));
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 4.0);
    ASSERT_EQ(run.results.size(), 1u);
    EXPECT_FALSE(run.results[0].ok);
    EXPECT_NE(run.results[0].error.find("timed out"), std::string::npos) << run.results[0].error;
  }
  {
    FakeOpenAiServer server({});
    const LevelRun run = run_level(workload_for(server), 2, 6, Clock::now());  // the deadline has passed
    EXPECT_EQ(run.requests_sent, 0);
    EXPECT_TRUE(run.deadline_reached);
    EXPECT_EQ(level_report(run)["not_sent"], 6);
    EXPECT_EQ(server.requests(), 0);
  }
  {
    int port;
    {
      FakeOpenAiServer gone({});
      port = gone.port();
    }  // nothing listens there now
    Workload w;
    w.url = parse_loopback_url("http://127.0.0.1:" + std::to_string(port));
    w.model = "m";
    w.prompt_text = "x";
    w.timeout_s = 5;
    const LevelRun run = run_level(w, 1, 1, in_seconds(60));
    ASSERT_EQ(run.results.size(), 1u);
    EXPECT_FALSE(run.results[0].ok);
    EXPECT_EQ(run.results[0].http_status, 0);
    EXPECT_NE(run.results[0].error.find("request failed"), std::string::npos) << run.results[0].error;
  }
}

TEST(ServeBenchServer, ReportJsonFields) {
  FakeOpenAiServer server({.first_delay_ms = 5, .gap_ms = 2, .tokens = 3});
  Workload w = workload_for(server);
  w.prompt_ids = {101, 102, 103};
  const nlohmann::json rep = make_report(w, 60, {run_level(w, 1, 2, in_seconds(120)), run_level(w, 2, 4, in_seconds(120))});
  EXPECT_EQ(rep["format"], "metainfer-serve-bench/1");
  EXPECT_EQ(server.last_body()["prompt"], nlohmann::json({101, 102, 103}));
  const nlohmann::json& s = rep["settings"];
  EXPECT_EQ(s["url"], server.url());
  EXPECT_EQ(s["model"], "fake-model");
  EXPECT_EQ(s["endpoint"], "completions");
  EXPECT_EQ(s["path"], "/v1/completions");
  EXPECT_EQ(s["prompt"]["kind"], "ids");
  EXPECT_EQ(s["prompt"]["ids"], 3);
  EXPECT_EQ(s["max_tokens"], 5);
  EXPECT_EQ(s["temperature"], 0);
  EXPECT_EQ(s["concurrency"], nlohmann::json({1, 2}));
  EXPECT_EQ(rep["failed_requests"], 0);
  EXPECT_EQ(rep["deadline_reached"], false);
  EXPECT_TRUE(rep["notes"].empty());
  ASSERT_EQ(rep["levels"].size(), 2u);
  for (const nlohmann::json& l : rep["levels"]) {
    for (const char* k : {"concurrency", "requests_planned", "requests_sent", "completed", "failed", "not_sent", "deadline_reached", "duration_s",
                          "request_throughput_rps", "output_token_throughput_tps", "total_output_tokens", "total_prompt_tokens",
                          "output_tokens_source", "requests_without_usage", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "errors", "first_error"})
      EXPECT_TRUE(l.contains(k)) << k;
    for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
      for (const char* k : {"n", "mean", "median", "p90", "p99"}) EXPECT_TRUE(l[m][k].is_number()) << m << "." << k;
  }
  EXPECT_EQ(rep["levels"][1]["completed"], 4);
  const std::string md = to_markdown(rep);
  for (const char* want : {"| concurrency | completed |", "| 2 | TTFT |", "| 1 | ITL |", "E2E", "TPOT"})
    EXPECT_NE(md.find(want), std::string::npos) << want << "\n" << md;
}

}  // namespace
