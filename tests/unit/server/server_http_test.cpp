// The OpenAI-compatible server over real HTTP on loopback (server/http_server.h + serving_loop.h), with FakeModel:
// endpoints, response and stream shapes, continuous batching, prefix caching, block exhaustion, disconnects, errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server_harness.h"

namespace mi::server::test {
namespace {

using Json = nlohmann::json;

std::string ids_json(const std::vector<int32_t>& ids) { return Json(ids).dump(); }

template <class H>
Json post(const H& h, const std::string& path, const std::string& body, int expect_status = 200) {
  httplib::Client c = h.client();
  const auto r = c.Post(path.c_str(), body, "application/json");
  EXPECT_TRUE(r) << "no response for " << body;
  if (!r) return {};
  EXPECT_EQ(r->status, expect_status) << r->body;
  return Json::parse(r->body);
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(40 + (i * 7 + salt * 13) % 50);
  return p;
}

TEST(ServerHttp, ModelsHealthAndUnknownRoutes) {
  Harness h;
  httplib::Client c = h.client();
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const Json m = Json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "fake");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(c.Get("/v1/models/fake")->status, 200);
  EXPECT_EQ(c.Get("/v1/models/other")->status, 404);
  const auto health = c.Get("/health");
  EXPECT_EQ(health->status, 200);
  const auto missing = c.Get("/v1/nothing");
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(Json::parse(missing->body)["error"]["message"].is_string());
  // An unknown path is counted under one label, never as itself: no label injection, no series per path.
  EXPECT_EQ(c.Get("/x%22%7D%0A%23evil")->status, 404);
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_EQ(metrics.find("\n#evil"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("metainfer_requests_total{endpoint=\"other\",status=\"404\"}"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("le=\"0.025\""), std::string::npos);
  const Json unknown_model = post(h, "/v1/completions", R"({"model": "gpt-4", "prompt": [1,2]})", 404);
  EXPECT_EQ(unknown_model["error"]["code"], "model_not_found");
}

TEST(ServerHttp, GreedyCompletionFromTokenIdsMatchesTheModel) {
  Harness h;
  const std::vector<int32_t> prompt = prompt_of(10, 1);
  const Json r = post(h, "/v1/completions",
                      R"({"model": "fake", "temperature": 0, "max_tokens": 12, "return_token_ids": true, "prompt": )" +
                          ids_json(prompt) + "}");
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), FakeModel::expected(prompt, 12));
  EXPECT_EQ(r["choices"][0]["text"], h.text_of(FakeModel::expected(prompt, 12)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  EXPECT_EQ(r["usage"]["total_tokens"], 22);
  EXPECT_TRUE(r["id"].get<std::string>().rfind("cmpl-", 0) == 0);
}

TEST(ServerHttp, TextPromptIsTokenizedWithTheTokenizer) {
  Harness h;
  const std::vector<int32_t> ids = h.tokenizer().encode("Hello world", true);
  const Json r = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 5, "prompt": "Hello world"})");
  EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(r["choices"][0]["text"], h.text_of(FakeModel::expected(ids, 5)));
}

TEST(ServerHttp, ChatUsesTheChatTemplate) {
  Harness h;
  const Json r = post(h, "/v1/chat/completions",
                      R"({"model": "fake", "temperature": 0, "max_completion_tokens": 6,
                          "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
  const std::string rendered = chat::ChatTemplate::load(tokenizer_dir())
                                   .render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])"),
                                           nullptr, true, nlohmann::ordered_json::object());
  const std::vector<int32_t> ids = h.tokenizer().encode(rendered, false);
  EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(r["choices"][0]["message"]["content"], h.text_of(FakeModel::expected(ids, 6)));
}

TEST(ServerHttp, StreamedCompletionConcatenatesToTheSameTextAndEndsWithUsageAndDone) {
  Harness h;
  const std::vector<int32_t> prompt = prompt_of(9, 2);
  httplib::Client c = h.client();
  const auto r = c.Post("/v1/completions",
                        R"({"model": "fake", "temperature": 0, "max_tokens": 10, "stream": true,
                            "stream_options": {"include_usage": true}, "prompt": )" + ids_json(prompt) + "}",
                        "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<std::string> events = sse_payloads(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  std::string text;
  std::string finish;
  std::set<std::string> ids;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    const Json chunk = Json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
    ids.insert(chunk["id"].get<std::string>());
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(ids.size(), 1u);  // one id for the whole stream
  EXPECT_EQ(text, h.text_of(FakeModel::expected(prompt, 10)));
  EXPECT_EQ(finish, "length");
}

TEST(ServerHttp, StreamedChatOpensWithTheRoleAndClosesWithAnEmptyDelta) {
  Harness h;
  httplib::Client c = h.client();
  const auto r = c.Post("/v1/chat/completions",
                        R"({"model": "fake", "temperature": 0, "max_tokens": 4, "stream": true,
                            "messages": [{"role": "user", "content": "Hi"}]})",
                        "application/json");
  ASSERT_TRUE(r);
  const std::vector<std::string> events = sse_payloads(r->body);
  ASSERT_GE(events.size(), 3u);
  const Json first = Json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(first.contains("usage"));  // only with include_usage
  const Json last = Json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST(ServerHttp, GreedyOutputIsTheSameAloneAndAmongConcurrentRequests) {
  Harness h;
  const int n = 8;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(prompt_of(5 + 3 * i, i));
  std::vector<std::string> alone;
  for (int i = 0; i < n; ++i)
    alone.push_back(post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 24, "prompt": )" +
                                                   ids_json(prompts[i]) + "}")["choices"][0]["text"]);
  std::vector<std::future<std::string>> together;
  for (int i = 0; i < n; ++i)
    together.push_back(std::async(std::launch::async, [&, i] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 24, "prompt": )" +
                                            ids_json(prompts[i]) + "}")["choices"][0]["text"].get<std::string>();
    }));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(together[i].get(), alone[i]) << "request " << i;
    EXPECT_EQ(alone[i], h.text_of(FakeModel::expected(prompts[i], 24)));
  }
  EXPECT_GT(h.model().max_batch_seen.load(), 1);  // decodes really went through forward_batch together
}

// /metrics counts the model's work per kind: prefill tokens actually computed, decode passes and the tokens they
// produced (aggregate decode throughput = tokens / seconds of decode passes, without the prefill steps).
double metric_value(const std::string& metrics, const std::string& name) {
  const std::size_t at = metrics.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name << " missing in\n" << metrics;
  return at == std::string::npos ? -1 : std::stod(metrics.substr(at + name.size() + 2));
}

TEST(ServerHttp, MetricsCountPrefillAndDecodeWork) {
  Harness h;
  const int n = 4, max_tokens = 9;
  std::vector<std::future<Json>> together;
  long long prompt_tokens = 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t> prompt = prompt_of(6 + i, 40 + i);
    prompt_tokens += (long long)prompt.size();
    together.push_back(std::async(std::launch::async, [&, prompt] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": )" + std::to_string(max_tokens) +
                                            R"(, "prompt": )" + ids_json(prompt) + "}");
    }));
  }
  for (auto& f : together) EXPECT_EQ(f.get()["usage"]["completion_tokens"], max_tokens);
  httplib::Client c = h.client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "metainfer_prefill_forward_tokens_total"), double(prompt_tokens));
  EXPECT_EQ(metric_value(metrics, "metainfer_prefill_forward_tokens_total"), double(h.model().prefilled_tokens.load()));
  // The first token of each request comes from its prefill; every later one from a decode pass.
  EXPECT_EQ(metric_value(metrics, "metainfer_decode_tokens_total"), double(n * (max_tokens - 1)));
  const double steps = metric_value(metrics, "metainfer_decode_steps_total");
  EXPECT_GE(steps, double(max_tokens - 1));
  EXPECT_LE(steps, double(n * (max_tokens - 1)));
  EXPECT_EQ(metric_value(metrics, "metainfer_decode_batch_size_count"), steps);
  EXPECT_EQ(metric_value(metrics, "metainfer_decode_batch_size_sum"), double(n * (max_tokens - 1)));
  EXPECT_GT(metric_value(metrics, "metainfer_decode_seconds_total"), 0.0);
  EXPECT_GT(metric_value(metrics, "metainfer_prefill_forward_seconds_total"), 0.0);
}

// More running requests than the kernels' batch-invariant row count: decodes go in passes of at most 8 rows.
TEST(ServerHttp, LargeBatchesDecodeInBatchInvariantPasses) {
  HarnessOptions o;
  o.max_batch = 16;
  Harness h(o);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) prompts.push_back(prompt_of(4 + i, 20 + i));
  std::vector<std::future<std::string>> together;
  for (int i = 0; i < 12; ++i)
    together.push_back(std::async(std::launch::async, [&, i] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 40, "prompt": )" +
                                            ids_json(prompts[i]) + "}")["choices"][0]["text"].get<std::string>();
    }));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(together[i].get(), h.text_of(FakeModel::expected(prompts[i], 40)));
  EXPECT_LE(h.model().max_batch_seen.load(), kBatchInvariantRows);
}

// An engine generated for max_batch 1 has no forward_batch (what the constraints do not ask for is not compiled in):
// the loop runs one request at a time through forward(), and concurrent clients still get the model's output.
TEST(ServerHttp, AnEngineWithoutTheBatchedPathServesOneRequestAtATime) {
  HarnessOptions o;
  o.max_batch = 1;
  BasicHarness<NoPrefixCache, FakeSingleSequenceModel> h(o);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(prompt_of(3 + 2 * i, 40 + i));
  std::vector<std::future<std::string>> together;
  for (int i = 0; i < 4; ++i)
    together.push_back(std::async(std::launch::async, [&, i] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 12, "prompt": )" +
                                            ids_json(prompts[i]) + "}")["choices"][0]["text"].get<std::string>();
    }));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(together[i].get(), h.text_of(FakeModel::expected(prompts[i], 12))) << i;
  EXPECT_EQ(h.model().prefilled_tokens.load(), 3 + 5 + 7 + 9 + 4 * 11) << "every decode went through forward()";
}

// The model throws in the middle of a request: that request (running) ends with an error object in its 200 body and
// is counted as 500 in /metrics; a request waiting behind it never touched the model, so it queues again and
// finishes with the right tokens instead of sharing the failure.
TEST(ServerHttp, AModelFailureFailsTheRunningRequestAndRequeuesTheWaitingOne) {
  HarnessOptions o;
  o.max_batch = 1;
  Harness h(o);
  const std::vector<int32_t> a_prompt = prompt_of(6, 1), b_prompt = prompt_of(7, 2);
  h.model().step_delay_ms = 20;
  h.model().fail_at_length = 6 + 40;  // a's 40th decode step: about 0.8 s in
  auto a = std::async(std::launch::async, [&] {
    return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 60, "prompt": )" + ids_json(a_prompt) + "}");
  });
  const auto wait_for = [&](auto done) {
    for (int i = 0; i < 400 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return h.loop().gauges().running == 1; }));
  auto b = std::async(std::launch::async, [&] {
    return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 8, "prompt": )" + ids_json(b_prompt) + "}");
  });
  ASSERT_TRUE(wait_for([&] { return h.loop().gauges().waiting == 1; })) << "b must queue behind a";
  const Json ra = a.get();
  ASSERT_TRUE(ra.contains("error")) << ra.dump();
  EXPECT_EQ(ra["error"]["type"], "server_error");
  EXPECT_NE(ra["error"]["message"].get<std::string>().find("injected model failure"), std::string::npos) << ra.dump();
  EXPECT_EQ(h.model().fail_at_length.load(), -1) << "the failure fired while b was waiting";
  h.model().step_delay_ms = 0;
  const Json rb = b.get();
  EXPECT_EQ(rb["choices"][0]["text"], h.text_of(FakeModel::expected(b_prompt, 8))) << rb.dump();
  httplib::Client c = h.client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("metainfer_requests_total{endpoint=\"/v1/completions\",status=\"500\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("metainfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1\n"), std::string::npos) << metrics;
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
}

// The admission of a request fails after it got its model sequence (here: the prefix layer throws once). That
// request is answered with the error, not re-queued for ever, and its sequence is freed: with max_batch 1 the next
// request still runs.
struct AttachFailsOnce : NoPrefixCache {
  using NoPrefixCache::NoPrefixCache;
  static inline std::atomic<bool> fired{false};
  int attach(int, std::span<const int32_t>) {
    if (!fired.exchange(true)) throw std::runtime_error("injected admission failure");
    return 0;
  }
};

TEST(ServerHttp, ARequestWhoseAdmissionFailsIsAnsweredAndFreesItsSequence) {
  HarnessOptions o;
  o.max_batch = 1;
  AttachFailsOnce::fired = false;
  BasicHarness<AttachFailsOnce> h(o);
  const std::vector<int32_t> prompt = prompt_of(5, 3);
  const std::string body = R"({"model": "fake", "temperature": 0, "max_tokens": 4, "prompt": )" + ids_json(prompt) + "}";
  const Json failed = post(h, "/v1/completions", body);
  ASSERT_TRUE(failed.contains("error")) << failed.dump();
  EXPECT_NE(failed["error"]["message"].get<std::string>().find("injected admission failure"), std::string::npos);
  const Json ok = post(h, "/v1/completions", body);
  EXPECT_EQ(ok["choices"][0]["text"], h.text_of(FakeModel::expected(prompt, 4))) << ok.dump();
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
}

TEST(ServerHttp, ChunkedPrefillGivesTheSameOutput) {
  HarnessOptions o;
  o.chunked_prefill = 3;
  Harness h(o);
  const std::vector<int32_t> prompt = prompt_of(17, 4);
  const Json r = post(h, "/v1/completions",
                      R"({"model": "fake", "temperature": 0, "max_tokens": 8, "prompt": )" + ids_json(prompt) + "}");
  EXPECT_EQ(r["choices"][0]["text"], h.text_of(FakeModel::expected(prompt, 8)));
}

TEST(ServerHttp, PrefixCacheReusesSharedPromptBlocks) {
  HarnessOptions o;
  o.block = 4;
  PrefixCacheHarness h(o);
  std::vector<int32_t> system = prompt_of(12, 7);  // 3 whole blocks
  std::vector<int32_t> a = system, b = system;
  for (int32_t t : {50, 51, 52}) a.push_back(t);
  for (int32_t t : {60, 61}) b.push_back(t);
  const Json ra = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 6, "prompt": )" + ids_json(a) + "}");
  EXPECT_EQ(ra["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const long long before = h.model().prefilled_tokens.load();
  const Json rb = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 6, "prompt": )" + ids_json(b) + "}");
  EXPECT_EQ(rb["usage"]["prompt_tokens_details"]["cached_tokens"], 12);
  EXPECT_EQ(h.model().prefilled_tokens.load() - before, 2);  // only the two new tokens were computed
  EXPECT_EQ(rb["choices"][0]["text"], h.text_of(FakeModel::expected(b, 6)));
  // A prompt that is cached in full still computes its last token (and gets the right first token).
  const Json again = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 6, "prompt": )" + ids_json(system) + "}");
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
  EXPECT_EQ(again["choices"][0]["text"], h.text_of(FakeModel::expected(system, 6)));
  httplib::Client c = h.client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("metainfer_prefix_cache_hit_tokens_total 20"), std::string::npos) << metrics;
}

// The prefix cache is refused at build time for a model whose linear-attention layers keep a recurrent state that a
// cached KV prefix cannot restore (generated hybrid models declare kHasRecurrentState).
struct FakeRecurrentModel : FakeModel {
  using FakeModel::FakeModel;
  static constexpr bool kHasRecurrentState = true;
};
static_assert(!kPrefixReuseFits<FakeRecurrentModel, runtime::PrefixCache>);
static_assert(kPrefixReuseFits<FakeRecurrentModel, NoPrefixCache>);
static_assert(kPrefixReuseFits<FakeModel, runtime::PrefixCache>);
static_assert(PrefixReuse<runtime::PrefixCache> && PrefixReuse<NoPrefixCache>);

// Built without the prefix cache (NoPrefixCache): a repeated prompt is prefilled in full again, nothing is cached,
// and /metrics reports no prefix-cache hits.
TEST(ServerHttp, PrefixCacheOffPrefillsEveryPromptInFull) {
  HarnessOptions o;
  o.block = 4;
  Harness h(o);
  const std::vector<int32_t> prompt = prompt_of(13, 7);
  for (int round = 0; round < 2; ++round) {
    const long long before = h.model().prefilled_tokens.load();
    const Json r = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 6, "prompt": )" + ids_json(prompt) + "}");
    EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(h.model().prefilled_tokens.load() - before, 13);
    EXPECT_EQ(r["choices"][0]["text"], h.text_of(FakeModel::expected(prompt, 6)));
  }
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
  httplib::Client c = h.client();
  const std::string metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("metainfer_prefix_cache_hit_tokens_total 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("metainfer_kv_cache_cached_blocks 0\n"), std::string::npos) << metrics;
}

TEST(ServerHttp, MoreRequestsThanKvBlocksWaitAndAllFinishCorrectly) {
  HarnessOptions o;
  o.max_batch = 2;  // the pool holds 2 x max_context: at most two of these requests run at once
  o.max_context = 64;
  Harness h(o);
  std::vector<std::future<Json>> rs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt_of(20, 10 + i));
  for (int i = 0; i < 6; ++i)
    rs.push_back(std::async(std::launch::async, [&, i] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 40, "prompt": )" + ids_json(prompts[i]) + "}");
    }));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rs[i].get()["choices"][0]["text"], h.text_of(FakeModel::expected(prompts[i], 40)));
  EXPECT_LE(h.model().max_batch_seen.load(), 2);
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
}

// KV blocks, not batch slots, are the limit here: 20 blocks of 4 positions hold one request's budget of 60
// positions (15 blocks) but not two, so the others wait for blocks although max_batch is 4, and finish correctly.
TEST(ServerHttp, RequestsWaitForKvBlocksWhenThePoolIsShort) {
  HarnessOptions o;
  o.max_batch = 4;
  o.max_context = 64;
  o.block = 4;
  o.kv_blocks = 20;
  Harness h(o);
  EXPECT_EQ(h.model().kv_cache().total_blocks(), 20u) << "the model's pool itself, not only the scheduler's budget";
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(prompt_of(20, 30 + i));
  std::vector<std::future<Json>> rs;
  for (int i = 0; i < 4; ++i)
    rs.push_back(std::async(std::launch::async, [&, i] {
      return post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 40, "prompt": )" + ids_json(prompts[i]) + "}");
    }));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rs[i].get()["choices"][0]["text"], h.text_of(FakeModel::expected(prompts[i], 40)));
  EXPECT_EQ(h.model().max_batch_seen.load(), 1);  // never two decoding at once
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
}

// A client that goes away: raw sockets, so the test controls exactly when it hangs up.
int connect_and_post(int port, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::write(fd, request.data(), request.size()) != ssize_t(request.size())) return -1;
  return fd;
}

bool wait_until_idle(Harness& h, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while ((h.loop().gauges().running > 0 || h.loop().gauges().kv_blocks_used > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return h.loop().gauges().running == 0 && h.loop().gauges().kv_blocks_used == 0;
}

// A non-streamed request is answered only at its end; a client that hangs up before is noticed by the whitespace
// the server writes every second, and its sequence freed long before its 90000 tokens.
TEST(ServerHttp, ADisconnectedNonStreamedRequestFreesItsSequence) {
  HarnessOptions o;
  o.max_context = 100000;
  o.max_batch = 2;
  Harness h(o);
  const int fd = connect_and_post(h.port(), R"({"model": "fake", "max_tokens": 90000, "ignore_eos": true, "prompt": [1,2,3]})");
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 1000 && h.loop().gauges().running < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(h.loop().gauges().running, 1);
  ::close(fd);
  EXPECT_TRUE(wait_until_idle(h, 15));
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
}

TEST(ServerHttp, ADisconnectedStreamFreesItsSequence) {
  HarnessOptions o;
  o.max_context = 100000;
  o.max_batch = 2;
  Harness h(o);
  // A raw client: send a streaming request, read the start of the stream, hang up.
  const std::string body =
      R"({"model": "fake", "temperature": 0, "max_tokens": 90000, "stream": true, "ignore_eos": true, "prompt": [1,2,3]})";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(h.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::write(fd, request.data(), request.size()), ssize_t(request.size()));
  std::string received;
  char buf[4096];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ASSERT_GT(n, 0);
    received.append(buf, std::size_t(n));
  }
  for (int i = 0; i < 1000 && h.loop().gauges().running < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(h.loop().gauges().running, 1);
  ::close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((h.loop().gauges().running > 0 || h.loop().gauges().kv_blocks_used > 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(h.loop().gauges().running, 0);
  EXPECT_EQ(h.model().kv_cache().free_blocks(), h.model().kv_cache().total_blocks());
  // The server still serves.
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 2, "prompt": [5]})")["usage"]["completion_tokens"], 2);
}

TEST(ServerHttp, BadInputGetsOpenAiErrorObjects) {
  HarnessOptions o;
  o.max_context = 32;
  o.max_body_bytes = 2048;
  Harness h(o);
  EXPECT_EQ(post(h, "/v1/completions", "{not json", 400)["error"]["type"], "invalid_request_error");
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "prompt": [1], "max_tokens": "x"})", 400)["error"]["param"], "max_tokens");
  const Json too_long = post(h, "/v1/completions", R"({"model": "fake", "prompt": [1,2,3,4,5,6,7,8,9,10], "max_tokens": 30})", 400);
  EXPECT_EQ(too_long["error"]["code"], "context_length_exceeded");
  EXPECT_NE(too_long["error"]["message"].get<std::string>().find("32"), std::string::npos);
  // The error names the field the client sent.
  EXPECT_EQ(too_long["error"]["param"], "max_tokens");
  const std::string chat_messages = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(post(h, "/v1/chat/completions", R"({"model": "fake", "max_tokens": 31, )" + chat_messages + "}", 400)["error"]["param"],
            "max_tokens");
  EXPECT_EQ(post(h, "/v1/chat/completions", R"({"model": "fake", "max_completion_tokens": 31, )" + chat_messages + "}", 400)["error"]["param"],
            "max_completion_tokens");
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "prompt": [999999999]})", 400)["error"]["param"], "prompt");
  const std::string big(4096, 'x');
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "prompt": ")" + big + "\"}", 413)["error"]["type"], "invalid_request_error");
  // Unknown fields are ignored (openai_request.h), at the top level and inside a message.
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 1, "prompt": [5], "vendor_field": {"a": 1}})")
                ["usage"]["completion_tokens"], 1);
  EXPECT_EQ(post(h, "/v1/chat/completions", R"({"model": "fake", "max_tokens": 1, "messages": [{"role": "user", "content": "x", "k": [1]}]})")
                ["usage"]["completion_tokens"], 1);
  // A prompt that alone fills the context leaves no room for a token.
  std::string ids = "[1";
  for (int i = 1; i < 32; ++i) ids += ",1";
  const Json full = post(h, "/v1/completions", R"({"model": "fake", "prompt": )" + ids + "]}", 400);
  EXPECT_EQ(full["error"]["param"], "prompt");
  EXPECT_EQ(full["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "prompt": [)" + ids.substr(3) + "]}")["usage"]["completion_tokens"], 1);
  // None of these took the server down.
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 1, "prompt": [5]})")["usage"]["completion_tokens"], 1);
}

// A body nested 100000 levels deep in a chat message (200 KB) is a 400, and the server stays up: copying such a
// message recursively would overflow the HTTP thread's stack.
TEST(ServerHttp, DeeplyNestedBodiesAreRefusedAndTheServerStaysUp) {
  Harness h;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body :
       {R"({"model": "fake", "max_tokens": 1, "messages": [{"role": "user", "content": "x", "k": )" + deep + "}]}",
        R"({"model": "fake", "max_tokens": 1, "prompt": [5], "k": )" + deep + "}"}) {
    const std::string route = body.find("messages") != std::string::npos ? "/v1/chat/completions" : "/v1/completions";
    const Json e = post(h, route, body, 400);
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("deeper than"), std::string::npos);
  }
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 1, "prompt": [5]})")["usage"]["completion_tokens"], 1);
}

TEST(ServerHttp, StopStringsAndSeededSampling) {
  Harness h;
  const std::vector<int32_t> prompt = prompt_of(6, 3);
  const std::string full = h.text_of(FakeModel::expected(prompt, 16));
  const std::string stop = full.substr(5, 2);
  const Json r = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 16, "stop": )" +
                                                Json(stop).dump() + R"(, "prompt": )" + ids_json(prompt) + "}");
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const std::string sampled = R"({"model": "fake", "temperature": 1.5, "seed": 11, "max_tokens": 16, "prompt": [3, 4]})";
  EXPECT_EQ(post(h, "/v1/completions", sampled)["choices"][0]["text"], post(h, "/v1/completions", sampled)["choices"][0]["text"]);
}

TEST(ServerHttp, LogprobsInBothShapes) {
  Harness h;
  const Json c = post(h, "/v1/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 3, "logprobs": 2, "prompt": [7, 8]})");
  const Json& lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  // Logit 8 for the chosen id, 0 for the other V - 1: logprob = 8 - log(e^8 + V - 1).
  const double vocab = double(h.tokenizer().vocab_size());
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), 8.0 - std::log(std::exp(8.0) + vocab - 1.0), 1e-4);
  double best = -1e30;  // the alternatives (an object keyed by token text) include the chosen token
  for (const auto& [text, value] : lp["top_logprobs"][0].items()) best = std::max(best, value.get<double>());
  EXPECT_NEAR(best, lp["token_logprobs"][0].get<double>(), 1e-6);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  const Json chat = post(h, "/v1/chat/completions", R"({"model": "fake", "temperature": 0, "max_tokens": 2, "logprobs": true,
                          "top_logprobs": 3, "messages": [{"role": "user", "content": "x"}]})");
  const Json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST(ServerHttp, QueueFullIs429AndDrainingIs503) {
  HarnessOptions o;
  o.max_batch = 1;
  o.max_waiting = 1;
  o.max_context = 100000;
  Harness h(o);
  // One long request runs, one waits; the next is refused.
  auto long_request = [&] {
    return std::async(std::launch::async, [&] {
      httplib::Client c = h.client();
      return c.Post("/v1/completions", R"({"model": "fake", "max_tokens": 6000, "ignore_eos": true, "prompt": [1]})",
                    "application/json");
    });
  };
  auto first = long_request();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (h.loop().gauges().running < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto second = long_request();
  while (h.loop().gauges().waiting < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const Json refused = post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 1, "prompt": [1]})", 429);
  EXPECT_EQ(refused["error"]["type"], "rate_limit_error");
  h.loop().drain();
  EXPECT_EQ(post(h, "/v1/completions", R"({"model": "fake", "max_tokens": 1, "prompt": [1]})", 503)["error"]["type"], "server_error");
  EXPECT_EQ(h.client().Get("/health")->status, 503);
  // Draining lets the ones in flight finish.
  const auto a = first.get();
  const auto b = second.get();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(Json::parse(b->body)["usage"]["completion_tokens"], 6000);
}

}  // namespace
}  // namespace mi::server::test
