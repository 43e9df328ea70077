// `metainfer serve-bench` as a real binary against the in-process fake server: the report on stdout and in --json,
// exit 0 when every request completed and 1 when some failed; a non-loopback URL and other bad flags exit 2 before
// any request is sent.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "generator/manifest.h"
#include "fake_openai_server.h"

namespace {
using mi_test::FakeOpenAiServer;
using mi_test::metainfer;
using nlohmann::json;

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

TEST(ServeBenchCli, RunsLevelsAndWritesTheReport) {
  FakeOpenAiServer server({.first_delay_ms = 20, .gap_ms = 5, .tokens = 4});
  mi_test::TempDir dir("serve-bench");
  const auto r = metainfer({"serve-bench", "--url", server.url(), "--concurrency", "1,2", "--max-tokens", "4", "--prompt-tokens", "16",
                            "--json", (dir / "r.json").string(), "--markdown", (dir / "r.md").string()},
                           120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| concurrency | completed |"), std::string::npos) << r.out;
  EXPECT_EQ(mi::generator::read_file(dir / "r.md"), r.out);
  const json rep = read_json(dir / "r.json");
  EXPECT_EQ(rep["format"], "metainfer-serve-bench/1");
  EXPECT_EQ(rep["settings"]["model"], "fake-model");  // the first id of /v1/models
  EXPECT_EQ(rep["settings"]["prompt"]["kind"], "text");
  EXPECT_EQ(rep["settings"]["prompt"]["words"], 16);
  ASSERT_EQ(rep["levels"].size(), 2u);
  EXPECT_EQ(rep["levels"][0]["requests_planned"], 4);  // default: 2 x concurrency, at least 4
  EXPECT_EQ(rep["levels"][1]["requests_planned"], 4);
  EXPECT_EQ(rep["levels"][0]["completed"], 4);
  EXPECT_EQ(rep["levels"][1]["completed"], 4);
  EXPECT_EQ(server.requests(), 8);
  EXPECT_EQ(server.last_body()["max_tokens"], 4);
  EXPECT_EQ(server.last_body()["prompt"].get<std::string>().size() > 16, true);
}

TEST(ServeBenchCli, FailedRequestsExitOneWithTheError) {
  FakeOpenAiServer server({.status = 500});
  const auto r = metainfer({"serve-bench", "--url", server.url() + "/v1", "--model", "x", "--requests", "2", "--prompt-ids-len", "8"}, 120);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("HTTP 500: fake overload"), std::string::npos) << r.out;
  EXPECT_EQ(server.last_body()["prompt"].size(), 8u);
}

TEST(ServeBenchCli, BadInputExitsTwoAndSendsNothing) {
  FakeOpenAiServer server({});
  const std::string port = std::to_string(server.port());
  const auto remote = metainfer({"serve-bench", "--url", "http://192.0.2.1:" + port});
  EXPECT_EQ(remote.exit_code, 2);
  EXPECT_NE(remote.err.find("refusing host '192.0.2.1'"), std::string::npos) << remote.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--url", "http://example.com:" + port}, {"--url", server.url(), "--concurrency", "0"},
        {"--url", server.url(), "--endpoint", "chat", "--prompt-ids-len", "4"}, {"--url", server.url(), "--prompt", "x", "--prompt-tokens", "3"},
        {"--url", server.url(), "--endpoint", "grpc"}, {"--url", server.url(), "--timeout-s", "0"}, {"--concurrency", "1"}}) {
    std::vector<std::string> argv = {"serve-bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = metainfer(argv);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(args) << r.err;
  }
  EXPECT_EQ(server.requests(), 0);
}

TEST(ServeBenchCli, UnreachableServerExitsOne) {
  int port;
  {
    FakeOpenAiServer gone({});
    port = gone.port();
  }
  const auto r = metainfer({"serve-bench", "--url", "http://localhost:" + std::to_string(port)});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/v1/models"), std::string::npos) << r.err;
}

}  // namespace
