// A real generated serve engine (runtime.mode = "serve", max_batch 8, a KV pool of 96 blocks, prefix cache on,
// chunked prefill 16) on a synthesised tiny Qwen3 with the real tokenizer, run as a process and driven over HTTP on
// loopback: the tokens it
// serves are the tokens the same engine generates offline (which the gates verified against the reference
// forward), alone and among concurrent requests; the prefix cache is hit; the official OpenAI SDK speaks to it
// unchanged; SIGTERM drains.
#include <httplib.h>

#include <future>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../toolkit_support.h"
#include "server_process.h"
#include "servebench/server_counters.h"

namespace {

namespace fs = std::filesystem;
using mi_test::metainfer;
using nlohmann::json;

class ServeEngine : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new mi_test::TempDir("serve");
    const auto s = metainfer({"synth-model", "--family", "qwen3", "--preset", "tiny", "--seed", "3", "-o", model().string(),
                              "--threads", "1"});
    ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
    ASSERT_TRUE(fs::exists(model() / "tokenizer.json")) << "synth-model wrote no tokenizer; run ./setup.sh";
    const auto g = metainfer({"generate", "--model", model().string(), "--mode", "serve", "--max-batch", "8",
                              "--prefix-cache", "on", "--chunked-prefill", "16", "--max-context", "512", "--kv-blocks", "96", "--threads", "2",
                              "-o", engine().string(), "--json"},
                             1800);
    ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
    const json result = mi_test::last_json_line(g.out);
    ASSERT_EQ(result.at("state"), "PASS_VERIFIED_ORACLE") << g.out;
    binary_ = result.at("binary").get<std::string>();
    server_ = new mi_test::ServerProcess({binary_, "serve", "--model", model().string(), "--port", "0"},
                                         (*dir_ / "serve.err").string());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model() { return *dir_ / "qwen3-tiny"; }
  static fs::path engine() { return *dir_ / "engine"; }

  static httplib::Client client(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(300, 0);
    return c;
  }
  static json post(int port, const std::string& path, const json& body, int status = 200) {
    httplib::Client c = client(port);
    const auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json::object();
    EXPECT_EQ(r->status, status) << r->body;
    return json::parse(r->body);
  }
  // Greedy ids from the server for a prompt of token ids.
  static std::vector<int32_t> served_ids(const std::vector<int32_t>& prompt, int max_tokens, json* response = nullptr) {
    const json r = post(server_->port(), "/v1/completions",
                        {{"model", "qwen3-tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                         {"return_token_ids", true}});
    if (response) *response = r;
    return r["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  }
  // Greedy ids from the same binary's offline path.
  static std::vector<int32_t> offline_ids(const std::vector<int32_t>& prompt, int max_tokens) {
    std::string ids;
    for (const int32_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    const auto r = mi::process::run({binary_, "generate", "--model", model().string(), "--prompt-ids", ids,
                                     "--max-new-tokens", std::to_string(max_tokens), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return mi_test::last_json_line(r.out).at("output_ids").get<std::vector<int32_t>>();
  }
  static std::vector<int32_t> prompt(int n, int salt) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(100 + (i * 131 + salt * 977) % 30000);
    return p;
  }

  static inline mi_test::TempDir* dir_ = nullptr;
  static inline mi_test::ServerProcess* server_ = nullptr;
  static inline std::string binary_;

  // The checks, run in order by the one test below.
  static void ReportsWhatItServes() {
    EXPECT_EQ(server_->ready()["event"], "listening");
    EXPECT_EQ(server_->ready()["max_batch"], 8);
    EXPECT_EQ(server_->ready()["kv_blocks"], 96);  // runtime.kv_blocks sized the pool (worst case: 8 x 512 / 16 = 256)
    EXPECT_EQ(server_->ready()["prefix_cache"], true);
    EXPECT_EQ(server_->ready()["chat"], true);
    httplib::Client c = client(server_->port());
    EXPECT_EQ(json::parse(c.Get("/v1/models")->body)["data"][0]["id"], "qwen3-tiny");
    const std::string metrics = c.Get("/metrics")->body;
    for (const char* name : {"metainfer_requests_running", "metainfer_kv_cache_usage_ratio", "metainfer_prefix_cache_hit_rate",
                             "metainfer_time_to_first_token_seconds_bucket", "metainfer_time_per_output_token_seconds_count"})
      EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }

  static void GreedyTokensAreTheOfflineEnginesAloneAndConcurrently() {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 8; ++i) prompts.push_back(prompt(3 + 11 * i, i));  // 3..80 tokens: one to six prefill chunks
    std::vector<std::vector<int32_t>> expected;
    for (const auto& p : prompts) expected.push_back(offline_ids(p, 20));
    for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(served_ids(prompts[i], 20), expected[i]) << "alone, prompt " << i;
    const auto before = counters();
    std::vector<std::future<std::vector<int32_t>>> together;
    for (const auto& p : prompts) together.push_back(std::async(std::launch::async, [p] { return served_ids(p, 20); }));
    for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].get(), expected[i]) << "concurrent, prompt " << i;
    // ... and they were decoded together: the concurrent phase's decode passes carried more than one sequence on
    // average (8 requests x 19 decode tokens; one at a time would be exactly 1), read as serve-bench reads /metrics.
    const auto after = counters();
    ASSERT_TRUE(before && after);
    const double passes = after->decode_steps - before->decode_steps;
    ASSERT_GT(passes, 0);
    EXPECT_GT((after->decode_tokens - before->decode_tokens) / passes, 2.0);
  }

  static std::optional<mi::servebench::ServerCounters> counters() {
    return mi::servebench::parse_counters(client(server_->port()).Get("/metrics")->body);
  }

  static void SharedPromptPrefixIsServedFromTheCache() {
    std::vector<int32_t> shared = prompt(64, 42);
    std::vector<int32_t> a = shared, b = shared;
    a.push_back(7);
    b.push_back(9);
    json ra, rb;
    const std::vector<int32_t> ids_a = served_ids(a, 8, &ra);
    const std::vector<int32_t> ids_b = served_ids(b, 8, &rb);
    EXPECT_EQ(rb["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
    EXPECT_EQ(ids_b, offline_ids(b, 8));
    EXPECT_EQ(ids_a, offline_ids(a, 8));
  }

  static void OfficialOpenAiSdkSpeaksToItUnchanged() {
    const fs::path sdk = fs::path(METAINFER_SOURCE_DIR) / ".cache" / "node_modules" / "openai";
    ASSERT_TRUE(fs::exists(sdk / "package.json")) << sdk << " is missing: run ./setup.sh (it installs the pinned npm openai)";
    const auto r = mi::process::run({"node", (fs::path(METAINFER_SOURCE_DIR) / "tests/unit/toolkit_serve/openai_sdk_client.cjs").string(),
                                     sdk.string(), "http://127.0.0.1:" + std::to_string(server_->port()) + "/v1", "qwen3-tiny"},
                                    {.timeout_s = 300});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json seen = mi_test::last_json_line(r.out);
    EXPECT_EQ(seen["chat"], seen["streamed"]);
  }

  static void SigtermDrainsTheRequestsInFlightThenExits() {
    mi_test::ServerProcess s({binary_, "serve", "--model", model().string(), "--port", "0"}, (*dir_ / "drain.err").string());
    auto running = std::async(std::launch::async, [&] {
      return post(s.port(), "/v1/completions", {{"model", "qwen3-tiny"}, {"prompt", prompt(8, 1)}, {"max_tokens", 500},
                                                {"temperature", 0}, {"ignore_eos", true}});
    });
    // Wait until it runs, then ask the server to stop.
    httplib::Client c = client(s.port());
    for (int i = 0; i < 500; ++i) {
      const auto m = c.Get("/metrics");
      if (m && m->body.find("metainfer_requests_running 1") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(s.pid(), SIGTERM);
    const json done = running.get();
    EXPECT_EQ(done["usage"]["completion_tokens"], 500);
    EXPECT_EQ(done["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(s.wait(60), 0);
  }
};

// One test, so that the engine is generated and verified once (CTest runs every discovered test in its own process,
// and each would repeat SetUpTestSuite).
TEST_F(ServeEngine, EndToEnd) {
  {
    SCOPED_TRACE("reports what it serves");
    ReportsWhatItServes();
  }
  {
    SCOPED_TRACE("greedy tokens alone and concurrently");
    GreedyTokensAreTheOfflineEnginesAloneAndConcurrently();
  }
  {
    SCOPED_TRACE("prefix cache");
    SharedPromptPrefixIsServedFromTheCache();
  }
  {
    SCOPED_TRACE("official OpenAI SDK");
    OfficialOpenAiSdkSpeaksToItUnchanged();
  }
  {
    SCOPED_TRACE("SIGTERM drain");
    SigtermDrainsTheRequestsInFlightThenExits();
  }
}

}  // namespace
