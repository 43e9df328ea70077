// The two LLM backends against the scripted endpoint over real loopback HTTP: the request each sends, the tool
// calls each parses (streaming off and on), token accounting, and the retry policy.
#include <gtest/gtest.h>

#include <chrono>

#include "agents/anthropic_backend.h"
#include "agents/llm_backend.h"
#include "agents/openai_backend.h"
#include "common/error.h"
#include "process/subprocess.h"
#include "../toolkit_support.h"
#include "scripted_llm_server.h"

namespace {

using namespace mi::agents;
using nlohmann::json;

ChatRequest two_tool_request() {
  ChatRequest r;
  r.system = "You are the implementer.";
  r.messages.push_back({Role::user, "Fix the kernel.", {}, "", false});
  r.tools.push_back({"read_file", "Read a file", {{"type", "object"}, {"properties", {{"path", {{"type", "string"}}}}}}});
  r.tools.push_back({"edit_file", "Edit a file", {{"type", "object"}}});
  return r;
}

BackendConfig config_for(const std::string& provider, const mi_test::ScriptedLlmServer& server, bool stream) {
  BackendConfig c;
  c.provider = provider;
  c.base_url = server.base_url() + (provider == "openai" ? "/v1" : "");
  c.model = "scripted-model";
  c.api_key = "sk-test";
  c.stream = stream;
  c.http.timeout_s = 10;
  c.http.retry.initial_backoff_s = 0.01;
  c.http.retry.max_attempts = 3;
  return c;
}

const json kToolCallReply = {
    {"text", "Reading it first."},
    {"tool_calls", json::array({{{"id", "call_1"}, {"name", "read_file"}, {"arguments", {{"path", "src/kernel.cpp"}}}},
                                {{"id", "call_2"}, {"name", "edit_file"}, {"arguments", {{"path", "a"}, {"old", "x"}, {"new", "y"}}}}})},
    {"usage", {{"input", 120}, {"output", 17}}}};

class BothApis : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(BothApis, SendsToolsAndParsesToolCalls) {
  const auto [provider, stream] = GetParam();
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"expect", {{"api", provider}, {"tools", {"read_file", "edit_file"}}, {"stream", stream}, {"last", "user"}, {"system_contains", "implementer"}}},
                                                                 {"respond", kToolCallReply}}})}});
  auto backend = make_backend(config_for(provider, server, stream));
  const ChatResponse r = backend->chat(two_tool_request());
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
  EXPECT_EQ(r.message.text, "Reading it first.");
  ASSERT_EQ(r.message.tool_calls.size(), 2u);
  EXPECT_EQ(r.message.tool_calls[0].id, "call_1");
  EXPECT_EQ(r.message.tool_calls[0].name, "read_file");
  EXPECT_EQ(r.message.tool_calls[0].arguments, json({{"path", "src/kernel.cpp"}}));
  EXPECT_EQ(r.message.tool_calls[1].arguments.value("new", ""), "y");
  EXPECT_EQ(r.stop_reason, "tool_use");
  EXPECT_EQ(r.usage.input_tokens, 120);
  EXPECT_EQ(r.usage.output_tokens, 17);
  EXPECT_EQ(r.http_attempts, 1);

  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const json& body = reqs[0].body;
  EXPECT_EQ(body["model"], "scripted-model");
  if (provider == "openai") {
    EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
    EXPECT_EQ(reqs[0].headers.at("authorization"), "Bearer sk-test");
    EXPECT_EQ(body["messages"][0]["role"], "system");
    EXPECT_EQ(body["tools"][0]["type"], "function");
    EXPECT_EQ(body["tools"][0]["function"]["parameters"]["properties"]["path"]["type"], "string");
    if (stream) EXPECT_EQ(body["stream_options"]["include_usage"], true);
  } else {
    EXPECT_EQ(reqs[0].path, "/v1/messages");
    EXPECT_EQ(reqs[0].headers.at("x-api-key"), "sk-test");
    EXPECT_EQ(reqs[0].headers.at("anthropic-version"), kAnthropicVersion);
    EXPECT_EQ(body["system"], "You are the implementer.");
    EXPECT_EQ(body["messages"][0]["content"][0]["type"], "text");
    EXPECT_EQ(body["tools"][0]["input_schema"]["properties"]["path"]["type"], "string");
    EXPECT_TRUE(body["max_tokens"].is_number_integer());
  }
}

TEST_P(BothApis, PlainTextAnswerEndsTheTurn) {
  const auto [provider, stream] = GetParam();
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"respond", {{"text", "Done: the stage is ready for the gate."}, {"usage", {{"input", 5}, {"output", 9}}}}}}})}});
  const ChatResponse r = make_backend(config_for(provider, server, stream))->chat(two_tool_request());
  EXPECT_EQ(r.message.text, "Done: the stage is ready for the gate.");
  EXPECT_TRUE(r.message.tool_calls.empty());
  EXPECT_EQ(r.stop_reason, "end_turn");
  EXPECT_EQ(r.usage.output_tokens, 9);
}

TEST_P(BothApis, RetriesA429HonouringRetryAfterThenSucceeds) {
  const auto [provider, stream] = GetParam();
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"respond", {{"status", 429}, {"headers", {{"Retry-After", "0.3"}}}, {"error", "slow down"}}}},
                                                                {{"respond", {{"text", "ok"}}}}})}});
  auto config = config_for(provider, server, stream);
  config.http.retry.initial_backoff_s = 0.001;  // so the wait measured below can only come from Retry-After
  const auto t0 = std::chrono::steady_clock::now();
  const ChatResponse r = make_backend(config)->chat(two_tool_request());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.message.text, "ok");
  EXPECT_EQ(r.http_attempts, 2);
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_GE(waited, 0.3);
  EXPECT_TRUE(server.failures().empty()) << ::testing::PrintToString(server.failures());
}

TEST_P(BothApis, GivesUpAfterMaxAttemptsOf500WithAClearError) {
  const auto [provider, stream] = GetParam();
  json steps = json::array();
  for (int i = 0; i < 3; ++i) steps.push_back({{"respond", {{"status", 500}, {"error", "upstream exploded"}}}});
  steps.push_back({{"respond", {{"text", "never reached"}}}});
  mi_test::ScriptedLlmServer server(json{{"steps", steps}});
  try {
    make_backend(config_for(provider, server, stream))->chat(two_tool_request());
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("HTTP 500: upstream exploded"), std::string::npos) << m;
    EXPECT_NE(m.find("after 3 attempts"), std::string::npos) << m;
    EXPECT_NE(m.find(server.base_url()), std::string::npos) << m;
  }
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(server.steps_left(), 1u);
}

TEST_P(BothApis, DoesNotRetryA400) {
  const auto [provider, stream] = GetParam();
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"respond", {{"status", 400}, {"error", "bad tools"}}}}, {{"respond", {{"text", "no"}}}}})}});
  EXPECT_THROW(make_backend(config_for(provider, server, stream))->chat(two_tool_request()), mi::Error);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_P(BothApis, ASilentEndpointTimesOutAndIsRetried) {
  const auto [provider, stream] = GetParam();
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"respond", {{"text", "too late"}, {"delay_s", 1.5}}}},
                                                                {{"respond", {{"text", "in time"}}}}})}});
  auto config = config_for(provider, server, stream);
  config.http.timeout_s = 0.3;
  const auto t0 = std::chrono::steady_clock::now();
  const ChatResponse r = make_backend(config)->chat(two_tool_request());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.4);  // the body would come at 1.5 s
  EXPECT_EQ(r.message.text, "in time");
  EXPECT_EQ(r.http_attempts, 2);
}

INSTANTIATE_TEST_SUITE_P(Agents, BothApis,
                         ::testing::Combine(::testing::Values("openai", "anthropic"), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_stream" : "_plain");
                         });

TEST(AgentBackend, ToolHistoryRoundTripsInBothFormats) {
  ChatRequest r = two_tool_request();
  Message a{Role::assistant, "", {{"call_1", "read_file", {{"path", "a"}}, "{\"path\":\"a\"}"}, {"call_2", "list_dir", json::object(), "{}"}}, "", false};
  r.messages.push_back(a);
  r.messages.push_back({Role::tool, "contents of a", {}, "call_1", false});
  r.messages.push_back({Role::tool, "refused: outside the run directory", {}, "call_2", true});

  const json o = openai_request_body(r, "m", false);
  EXPECT_TRUE(o["messages"][2]["content"].is_null());
  EXPECT_EQ(o["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"path\":\"a\"}");
  EXPECT_EQ(o["messages"][3]["role"], "tool");
  EXPECT_EQ(o["messages"][3]["tool_call_id"], "call_1");
  EXPECT_EQ(o["messages"].size(), 5u);
  EXPECT_EQ(o["max_tokens"], 4096);
  EXPECT_EQ(openai_request_body(r, "m", false, "max_completion_tokens")["max_completion_tokens"], 4096);

  const json an = anthropic_request_body(r, "m", false);
  ASSERT_EQ(an["messages"].size(), 3u);  // user, assistant, one user message holding both results
  EXPECT_EQ(an["messages"][1]["content"][0]["type"], "tool_use");
  EXPECT_EQ(an["messages"][1]["content"][0]["input"]["path"], "a");
  EXPECT_EQ(an["messages"][2]["content"].size(), 2u);
  EXPECT_EQ(an["messages"][2]["content"][1]["tool_use_id"], "call_2");
  EXPECT_EQ(an["messages"][2]["content"][1]["is_error"], true);
}

TEST(AgentBackend, MalformedToolArgumentsKeepTheRawText) {
  const json body = {{"choices", json::array({{{"message", {{"role", "assistant"}, {"content", nullptr},
                                                            {"tool_calls", json::array({{{"id", "c"}, {"type", "function"}, {"function", {{"name", "read_file"}, {"arguments", "{not json"}}}}})}}},
                                               {"finish_reason", "tool_calls"}}})}};
  const ChatResponse r = parse_openai_response(body);
  ASSERT_EQ(r.message.tool_calls.size(), 1u);
  EXPECT_TRUE(r.message.tool_calls[0].arguments.is_null());
  EXPECT_EQ(r.message.tool_calls[0].raw_arguments, "{not json");
  EXPECT_THROW(parse_openai_response(json{{"id", "x"}}), mi::Error);
}

TEST(AgentBackend, UnreachableEndpointFailsAfterRetries) {
  int port = 0;
  { mi_test::ScriptedLlmServer s(json::object()); port = s.port(); }  // a port nobody listens on now
  BackendConfig c{"openai", "http://127.0.0.1:" + std::to_string(port) + "/v1", "m", "", false, {}};
  c.http.retry = {2, 0.01, 0.05};
  c.http.connect_timeout_s = 2;
  try {
    make_backend(c)->chat(two_tool_request());
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no response"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("after 2 attempts"), std::string::npos) << e.what();
  }
}

TEST(AgentBackend, HttpsEndpointIsVerifiedAgainstItsCa) {
  mi_test::TempDir dir("agents-tls");
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const auto made = mi::process::run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                                      "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
  if (made.exit_code != 0) GTEST_SKIP() << "no openssl to make a certificate: " << made.err;
  mi_test::ScriptedLlmServer server(json{{"steps", json::array({{{"respond", {{"text", "over tls"}}}}, {{"respond", {{"text", "unused"}}}}})}}, cert, key);
  ASSERT_EQ(server.base_url().rfind("https://", 0), 0u);
  BackendConfig c = config_for("openai", server, false);
  c.http.retry.max_attempts = 1;
  // The system store does not know our CA: refused.
  try {
    make_backend(c)->chat(two_tool_request());
    FAIL() << "an unverifiable certificate was accepted";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("SSL"), std::string::npos) << e.what();
  }
  c.http.ca_cert_file = cert;
  EXPECT_EQ(make_backend(c)->chat(two_tool_request()).message.text, "over tls");
  EXPECT_EQ(server.requests().size(), 1u);  // the refused handshake never reached the handler
}

TEST(AgentBackend, ConfigFromEnvironmentAndErrors) {
  ::setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anth", 1);
  ::setenv("ANTHROPIC_MODEL", "claude-test", 1);
  const BackendConfig c = resolve_backend_config({.provider = "anthropic"});
  EXPECT_EQ(c.base_url, "http://127.0.0.1:9/anth");
  EXPECT_EQ(c.model, "claude-test");
  const BackendConfig flags = resolve_backend_config({.provider = "anthropic", .base_url = "http://h:1", .model = "x"});
  EXPECT_EQ(flags.base_url, "http://h:1");  // a flag wins over the environment
  ::unsetenv("ANTHROPIC_BASE_URL");
  ::unsetenv("ANTHROPIC_MODEL");
  EXPECT_THROW(make_backend({.provider = "gemini", .model = "m"}), mi::Error);
  EXPECT_THROW(make_backend({.provider = "openai", .base_url = "ftp://x/v1", .model = "m"}), mi::Error);
  EXPECT_THROW(make_backend({.provider = "openai", .base_url = "http://x/v1"}), mi::Error);  // no model
  const EndpointUrl u = parse_endpoint_url("https://api.example.com/v1/");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.base_path, "/v1");
}

TEST(AgentBackend, RetryPolicyBackoffAndRetryAfter) {
  RetryPolicy p{5, 1.0, 8.0};
  EXPECT_DOUBLE_EQ(p.delay_s(2, std::nullopt), 1.0);
  EXPECT_DOUBLE_EQ(p.delay_s(3, std::nullopt), 2.0);
  EXPECT_DOUBLE_EQ(p.delay_s(6, std::nullopt), 8.0);  // capped
  EXPECT_DOUBLE_EQ(p.delay_s(2, 3.0), 3.0);
  EXPECT_DOUBLE_EQ(p.delay_s(2, 100.0), 8.0);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_TRUE(RetryPolicy::retryable(429));
  EXPECT_TRUE(RetryPolicy::retryable(503));
  EXPECT_FALSE(RetryPolicy::retryable(404));
}

}  // namespace
