// serve-bench's pieces without a network: percentiles on known arrays (exact), the SSE parser and the OpenAI stream
// under every split of the bytes, what counts as content, usage and errors, the loopback-only URL, the request body.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "servebench/loopback_url.h"
#include "servebench/openai_stream.h"
#include "servebench/percentiles.h"
#include "servebench/prompt.h"
#include "servebench/server_counters.h"
#include "servebench/sse_parser.h"
#include "servebench/workload.h"

namespace {
using namespace mi::servebench;
using namespace std::chrono_literals;

TEST(ServeBenchPercentile, LinearInterpolationOnKnownArrays) {
  // numpy.percentile([1..10], p): 50 -> 5.5, 90 -> 9.1, 99 -> 9.91, 0 -> 1, 100 -> 10.
  const std::vector<double> ten = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(ten, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(ten, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile(ten, 99), 9.91);
  EXPECT_DOUBLE_EQ(percentile(ten, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(ten, 100), 10);
  EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 40), 29);  // rank 1.6: 20 + 0.6 * 15
  EXPECT_DOUBLE_EQ(percentile({42}, 99), 42);
  EXPECT_DOUBLE_EQ(percentile({1, 2}, 50), 1.5);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));

  const Summary s = summarize({1, 2, 3, 4});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);
  EXPECT_DOUBLE_EQ(s.p99, 3.97);
  const nlohmann::json j = to_json(s, 1000);
  EXPECT_DOUBLE_EQ(j["mean"].get<double>(), 2500);
  EXPECT_DOUBLE_EQ(j["p99"].get<double>(), 3970);
  const nlohmann::json empty = to_json(summarize({}));
  EXPECT_EQ(empty["n"], 0);
  EXPECT_TRUE(empty["mean"].is_null() && empty["median"].is_null() && empty["p90"].is_null() && empty["p99"].is_null());
}

std::vector<std::string> parse_all(const std::string& bytes, std::size_t piece) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) {
    events.emplace_back(d);
    return true;
  });
  for (std::size_t i = 0; i < bytes.size(); i += piece) EXPECT_TRUE(p.feed(std::string_view(bytes).substr(i, piece)));
  EXPECT_TRUE(p.finish());
  return events;
}

TEST(ServeBenchSse, EventsSurviveEverySplit) {
  const std::string stream =
      ": keep-alive\n\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\ndata:{\"b\":2}\r\n\r\n"
      "data: line1\ndata: line2\n\n"
      "id: 7\n\n"  // no data: no event
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"};
  for (std::size_t piece : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(7), stream.size()}) {
    SCOPED_TRACE(piece);
    EXPECT_EQ(parse_all(stream, piece), want);
  }
  // A server that closes right after "data: [DONE]" without the blank line (or the newline).
  EXPECT_EQ(parse_all("data: x\n\ndata: [DONE]\n", 4), (std::vector<std::string>{"x", "[DONE]"}));
  EXPECT_EQ(parse_all("data: x\n\ndata: [DONE]", 4), (std::vector<std::string>{"x", "[DONE]"}));
}

TEST(ServeBenchSse, OverlongLineStops) {
  SseParser p([](std::string_view) { return true; }, 16);
  EXPECT_FALSE(p.feed("data: 0123456789012345678901234"));
  EXPECT_NE(p.error().find("longer than 16"), std::string::npos);
}

std::string sse(const std::vector<std::string>& datas) {
  std::string s;
  for (const auto& d : datas) s += "data: " + d + "\n\n";
  return s;
}

// Feeds `bytes` in pieces of `piece` bytes, the clock advancing 1 ms per piece.
RequestResult run_stream(const std::string& bytes, std::size_t piece = 1 << 20) {
  const Clock::time_point t0 = Clock::now();
  OpenAiStream s(t0);
  Clock::time_point now = t0;
  for (std::size_t i = 0; i < bytes.size(); i += piece) {
    now += 1ms;
    if (!s.feed(std::string_view(bytes).substr(i, piece), now)) break;
  }
  return s.finish();
}

TEST(ServeBenchStream, ContentChunksUsageAndTimings) {
  const std::string body = sse({R"({"choices":[{"text":""}]})", R"({"choices":[{"text":"a"}],"usage":null})", R"({"choices":[{"text":"b"}]})",
                                R"({"choices":[{"text":"c"}]})", R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}})", "[DONE]"});
  const RequestResult whole = run_stream(body);
  EXPECT_TRUE(whole.ok) << whole.error;
  EXPECT_EQ(whole.content_chunks, 3);
  EXPECT_EQ(whole.usage_completion_tokens, 3);
  EXPECT_EQ(whole.usage_prompt_tokens, 5);
  EXPECT_TRUE(whole.done);
  // Byte by byte: each byte is 1 ms, so the timings are exact byte offsets.
  const RequestResult r = run_stream(body, 1);
  ASSERT_TRUE(r.ok) << r.error;
  // TTFT is when the event with "a" completes (its blank line's '\n'), in ms = its byte offset + 1.
  const std::string e0 = sse({R"({"choices":[{"text":""}]})"}), e1 = sse({R"({"choices":[{"text":"a"}],"usage":null})"}),
                    e2 = sse({R"({"choices":[{"text":"b"}]})"}), e3 = sse({R"({"choices":[{"text":"c"}]})"});
  EXPECT_NEAR(r.ttft_s, double(e0.size() + e1.size()) / 1000, 1e-9);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], double(e2.size()) / 1000, 1e-9);
  EXPECT_NEAR(r.itl_s[1], double(e3.size()) / 1000, 1e-9);
  EXPECT_NEAR(r.latency_s, double(e0.size() + e1.size() + e2.size() + e3.size()) / 1000, 1e-9);
  ASSERT_TRUE(r.tpot_s().has_value());
  EXPECT_NEAR(*r.tpot_s(), (r.latency_s - r.ttft_s) / 2, 1e-12);
  EXPECT_EQ(r.output_tokens(), 3);
}

TEST(ServeBenchStream, ChatDeltasAndRoleChunk) {
  const RequestResult r = run_stream(sse({R"({"choices":[{"delta":{"role":"assistant","content":""}}]})",
                                          R"({"choices":[{"delta":{"reasoning_content":"hm"}}]})", R"({"choices":[{"delta":{"content":"Hi"}}]})",
                                          R"({"choices":[{"delta":{},"finish_reason":"stop"}]})", "[DONE]"}),
                                     5);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.content_chunks, 2);
  EXPECT_FALSE(r.output_tokens_from_usage());  // no usage chunk: content chunks stand in
  EXPECT_EQ(r.output_tokens(), 2);
}

TEST(ServeBenchStream, FailuresCarryTheirMessage) {
  const RequestResult err = run_stream(sse({R"({"choices":[{"text":"a"}]})", R"({"error":{"message":"out of KV cache","code":500}})", "[DONE]"}), 3);
  EXPECT_FALSE(err.ok);
  EXPECT_EQ(err.error, "error in stream: out of KV cache");
  const RequestResult obj = run_stream(sse({R"({"object":"error","message":"bad model"})"}));
  EXPECT_EQ(obj.error, "error in stream: bad model");
  const RequestResult bad = run_stream(sse({R"({"choices":[{"text":"a"}]})", "{not json", "[DONE]"}));
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("malformed SSE"), std::string::npos) << bad.error;
  const RequestResult cut = run_stream(sse({R"({"choices":[{"text":"a"}]})"}));
  EXPECT_FALSE(cut.ok);
  EXPECT_NE(cut.error.find("without 'data: [DONE]'"), std::string::npos) << cut.error;
  const RequestResult empty = run_stream(sse({R"({"choices":[{"text":""}]})", "[DONE]"}));
  EXPECT_FALSE(empty.ok);
  EXPECT_NE(empty.error.find("no content"), std::string::npos) << empty.error;
  EXPECT_FALSE(empty.tpot_s().has_value());
}

// The engine counters are read from the exposition by exact name; a server missing any of them has none.
TEST(ServeBenchServerCounters, ParsedByNameAndAllRequired) {
  const std::string text =
      "# HELP metainfer_decode_tokens_total x\n# TYPE metainfer_decode_tokens_total counter\n"
      "metainfer_decode_tokens_total 120\nmetainfer_decode_tokens_total_other 9\nmetainfer_decode_steps_total 30\n"
      "metainfer_decode_seconds_total 2.5\nmetainfer_prefill_forward_tokens_total 64\n"
      "metainfer_prefill_forward_seconds_total 0.5\nmetainfer_decode_batch_size_sum 120\n";
  const auto c = parse_counters(text);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->decode_tokens, 120);
  EXPECT_EQ(c->decode_steps, 30);
  EXPECT_EQ(c->decode_seconds, 2.5);
  EXPECT_EQ(c->prefill_tokens, 64);
  EXPECT_EQ(c->prefill_seconds, 0.5);
  EXPECT_FALSE(parse_counters("metainfer_decode_tokens_total 1\n"));
  EXPECT_FALSE(parse_counters("vllm:num_requests_running 3\n"));
  ServerCounters later = *c;
  later.decode_tokens += 80;
  later.decode_steps += 10;
  later.decode_seconds += 4;
  const nlohmann::json w = server_work(c, later);
  EXPECT_EQ(w["decode_tok_s"], 20.0);
  EXPECT_EQ(w["mean_decode_batch"], 8.0);
  EXPECT_TRUE(w["prefill_tok_s"].is_null()) << "no prefill in the interval";
  EXPECT_TRUE(server_work(std::nullopt, later).is_null());
}

TEST(ServeBenchUrl, LoopbackOnly) {
  const ServerUrl a = parse_loopback_url("http://127.0.0.1:8000");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8000);
  EXPECT_EQ(a.base_path, "");
  EXPECT_EQ(a.text, "http://127.0.0.1:8000");
  const ServerUrl b = parse_loopback_url("http://[::1]:9/v1/");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 9);
  EXPECT_EQ(b.base_path, "");
  EXPECT_EQ(b.text, "http://[::1]:9");
  EXPECT_EQ(parse_loopback_url("http://LocalHost/proxy/").base_path, "/proxy");
  EXPECT_EQ(parse_loopback_url("http://localhost").port, 80);
  for (const char* bad : {"http://10.0.0.1:8000", "http://example.com:8000", "http://127.0.0.2:8000", "http://0.0.0.0:8000",
                          "https://127.0.0.1:8000", "127.0.0.1:8000", "http://127.0.0.1.evil.com:80", "http://evil.com@127.0.0.1:80",
                          "http://[::2]:80", "http://127.0.0.1:0", "http://127.0.0.1:70000", "http://127.0.0.1:8x", "http://::1:80", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_loopback_url(bad), mi::Error);
  }
  try {
    parse_loopback_url("http://192.168.1.5:8000");
    FAIL();
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("refusing host '192.168.1.5'"), std::string::npos) << e.what();
  }
}

TEST(ServeBenchWorkload, RequestBodyAndDeterministicPrompts) {
  Workload w;
  w.model = "m";
  w.prompt_text = text_prompt(8);
  w.max_tokens = 16;
  nlohmann::json b = request_body(w);
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["prompt"], w.prompt_text);
  EXPECT_EQ(b["max_tokens"], 16);
  EXPECT_EQ(b["temperature"], 0);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_FALSE(b.contains("ignore_eos"));
  EXPECT_EQ(endpoint_path(w.endpoint), "/v1/completions");

  w.prompt_ids = id_prompt(5);
  b = request_body(w);
  ASSERT_TRUE(b["prompt"].is_array());
  EXPECT_EQ(b["prompt"].size(), 5u);

  w.endpoint = Endpoint::chat;
  w.prompt_ids.clear();
  b = request_body(w);
  EXPECT_EQ(endpoint_path(w.endpoint), "/v1/chat/completions");
  EXPECT_EQ(b["messages"][0]["role"], "user");
  EXPECT_EQ(b["messages"][0]["content"], w.prompt_text);
  EXPECT_FALSE(b.contains("prompt"));

  EXPECT_EQ(text_prompt(8), text_prompt(8));
  const std::string eight = text_prompt(8);
  EXPECT_EQ(std::count(eight.begin(), eight.end(), ' '), 7);
  EXPECT_EQ(id_prompt(64), id_prompt(64));
  for (int id : id_prompt(64)) {
    EXPECT_GE(id, 100);
    EXPECT_LT(id, 1100);
  }
}

}  // namespace
