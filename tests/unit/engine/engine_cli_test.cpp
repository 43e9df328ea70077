// The engine command line end to end, in-process, on the golden qwen3-tiny checkpoint (no tokenizer) through the
// test model (dense forward from the components, scalar kernels, precise numerics): greedy output equals the
// Hugging Face trace, --json fields, exit statuses and messages for bad input, EOS handling, --version.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

namespace fs = std::filesystem;
using mi_test::CliRun;
using mi_test::join_ids;
using mi_test::run_cli;
using mi_test::test_engine_info;

const fs::path kGolden = fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny";

struct TracePrompt {
  std::vector<int> prompt_ids, greedy_ids;
};

TracePrompt trace_prompt(const std::string& name, const fs::path& dir = kGolden) {
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  for (const auto& p : trace.at("prompts"))
    if (p.at("name") == name) return {p.at("prompt_ids").get<std::vector<int>>(), p.at("greedy_ids").get<std::vector<int>>()};
  ADD_FAILURE() << "no prompt " << name;
  return {};
}

std::vector<int> ids_of(const std::string& text) {
  std::vector<int> ids;
  for (const int32_t id : mi::engine::parse_prompt_ids(text)) ids.push_back(id);
  return ids;
}

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("mi_engine_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(EngineCli, GreedyJsonMatchesGoldenTrace) {
  const TracePrompt p1 = trace_prompt("p1");
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", kGolden.string(), "--prompt-ids",
                                                join_ids(p1.prompt_ids), "--max-new-tokens", "32", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int>>(), p1.prompt_ids);
  EXPECT_EQ(j.at("output_ids").get<std::vector<int>>(), p1.greedy_ids);
  ASSERT_TRUE(j.at("text").is_string());
  EXPECT_EQ(j.at("text"), "");  // no tokenizer: ids only
  EXPECT_EQ(j.at("finish_reason"), "length");
  ASSERT_TRUE(j.at("ttft_ms").is_number());
  ASSERT_TRUE(j.at("tpot_ms").is_number());
  EXPECT_GT(j.at("ttft_ms").get<double>(), 0.0);
  EXPECT_GT(j.at("tpot_ms").get<double>(), 0.0);
  ASSERT_TRUE(j.at("prompt_tokens").is_number_integer());
  ASSERT_TRUE(j.at("completion_tokens").is_number_integer());
  EXPECT_EQ(j.at("prompt_tokens"), 10);
  EXPECT_EQ(j.at("completion_tokens"), 32);
  EXPECT_EQ(j.at("mode"), "precise");
  EXPECT_EQ(j.at("kernel_level"), "avx2");
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one JSON object on one line";
}

TEST(EngineCli, PlainOutputPrintsIdsWithoutTokenizer) {
  const TracePrompt p0 = trace_prompt("p0");
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", kGolden.string(), "--prompt-ids",
                                                join_ids(p0.prompt_ids), "--max-new-tokens", "32"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, join_ids(p0.greedy_ids) + "\n");
}

// metainfer bench's TTFT origin: one '@' before the ids, nothing else changed; not for a rejected request.
TEST(EngineCli, MarkPromptStartWritesOneAtBeforeTheIds) {
  const TracePrompt p0 = trace_prompt("p0");
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", kGolden.string(), "--prompt-ids",
                                                join_ids(p0.prompt_ids), "--max-new-tokens", "32", "--mark-prompt-start"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "@" + join_ids(p0.greedy_ids) + "\n");
  const CliRun rejected = run_cli(test_engine_info(), {"generate", "--model", kGolden.string(), "--prompt-ids",
                                                       "1,2,3,4,5,6,7,8,9,10", "--max-new-tokens", "250",
                                                       "--mark-prompt-start"});
  EXPECT_EQ(rejected.code, 2);
  EXPECT_EQ(rejected.out.find('@'), std::string::npos) << rejected.out;
}

TEST(EngineCli, ChunkedPrefillGivesTheSameGreedyIds) {
  const TracePrompt p2 = trace_prompt("p2");  // 150 prompt tokens
  mi::engine::EngineInfo info = test_engine_info();
  info.chunked_prefill = 16;  // 10 chunks, the last one partial
  const CliRun r = run_cli(info, {"generate", "--model", kGolden.string(), "--prompt-ids", join_ids(p2.prompt_ids),
                                  "--max-new-tokens", "32", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("output_ids").get<std::vector<int>>(), p2.greedy_ids);
}

TEST(EngineCli, DefaultMaxNewTokensIsCappedByTheContextLeft) {
  const TracePrompt p1 = trace_prompt("p1");
  const CliRun r = run_cli(test_engine_info(512, 20),
                           {"generate", "--model", kGolden.string(), "--prompt-ids", join_ids(p1.prompt_ids), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::vector<int> expected(p1.greedy_ids.begin(), p1.greedy_ids.begin() + 10);  // 20 - 10 prompt tokens
  EXPECT_EQ(j.at("output_ids").get<std::vector<int>>(), expected);
  EXPECT_EQ(j.at("finish_reason"), "length");
}

TEST(EngineCli, StopsAtEosIdFromConfig) {
  const TracePrompt p1 = trace_prompt("p1");
  TempDir dir("eos");
  for (const char* f : {"model.safetensors"}) fs::copy_file(kGolden / f, dir.path() / f);
  std::ifstream cin(kGolden / "config.json");
  nlohmann::json config = nlohmann::json::parse(cin);
  const int eos = p1.greedy_ids[5];  // first occurrence is at index 5
  ASSERT_EQ(std::find(p1.greedy_ids.begin(), p1.greedy_ids.end(), eos) - p1.greedy_ids.begin(), 5);
  config["eos_token_id"] = eos;
  std::ofstream(dir.path() / "config.json") << config.dump();
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", dir.path().string(), "--prompt-ids",
                                                join_ids(p1.prompt_ids), "--max-new-tokens", "32", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::vector<int> expected(p1.greedy_ids.begin(), p1.greedy_ids.begin() + 6);  // EOS id included
  EXPECT_EQ(j.at("output_ids").get<std::vector<int>>(), expected);
  EXPECT_EQ(j.at("finish_reason"), "eos");
}

TEST(EngineCli, SeededSamplingIsReproducible) {
  const TracePrompt p1 = trace_prompt("p1");
  const auto sample = [&](const std::string& seed) {
    const CliRun r = run_cli(test_engine_info(),
                             {"generate", "--model", kGolden.string(), "--prompt-ids", join_ids(p1.prompt_ids),
                              "--max-new-tokens", "16", "--temperature", "1.5", "--top-p", "0.95", "--seed", seed});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  const std::string a = sample("7"), b = sample("7"), c = sample("8");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // 16 draws from a hot distribution over 512 ids: equal runs would mean the seed is ignored
  EXPECT_EQ(ids_of(a.substr(0, a.size() - 1)).size(), 16u);
}

TEST(EngineCli, TopKOneIsGreedy) {
  const TracePrompt p1 = trace_prompt("p1");
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", kGolden.string(), "--prompt-ids",
                                                join_ids(p1.prompt_ids), "--max-new-tokens", "32", "--temperature",
                                                "2", "--top-k", "1", "--seed", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, join_ids(p1.greedy_ids) + "\n");
}

TEST(EngineCli, VersionJsonWorksWithoutModel) {
  const mi::engine::EngineInfo info = test_engine_info();
  const CliRun r = run_cli(info, {"--version", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("manifest_sha256"), info.manifest_sha256);
  EXPECT_EQ(j.at("engine"), "test-engine");
  EXPECT_EQ(j.at("architecture"), "Qwen3ForCausalLM");
  EXPECT_EQ(j.at("family"), "qwen3");
  EXPECT_EQ(j.at("kernel_level"), "avx2");
  EXPECT_EQ(j.at("metainfer_version"), "0.0.0-test");
  EXPECT_EQ(j.at("default_mode"), info.fast_numerics_default ? "fast" : "precise");
  EXPECT_EQ(j.at("fast_kv_dtype"), "f32");
  EXPECT_EQ(j.at("weight_dtype"), info.weight_dtype);
  const CliRun text = run_cli(info, {"--version"});
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find(info.manifest_sha256), std::string::npos);
  EXPECT_NE(text.out.find("KV cache in fast mode f32"), std::string::npos) << text.out;

  // A fast engine planned with runtime.kv_dtype = "bf16" says so.
  mi::engine::EngineInfo fast = info;
  fast.fast_numerics_default = true;
  fast.bf16_kv_in_fast = true;
  const nlohmann::json jf = nlohmann::json::parse(run_cli(fast, {"--version", "--json"}).out);
  EXPECT_EQ(jf.at("default_mode"), "fast");
  EXPECT_EQ(jf.at("fast_kv_dtype"), "bf16");
  EXPECT_NE(run_cli(fast, {"--version"}).out.find("default mode fast; KV cache in fast mode bf16"), std::string::npos);
  EXPECT_EQ(mi_test::TestModel::live_sequences, 0);
}

struct BadInput {
  std::vector<std::string> args;
  std::string message;  // must appear in stderr
};

TEST(EngineCli, BadInputExitsTwoWithAMessage) {
  const std::string model = kGolden.string();
  const std::vector<BadInput> cases = {
      {{"generate", "--model", model, "--prompt-ids", "1,2", "--bogus"}, "--bogus"},
      {{"generate", "--model", model, "--prompt-ids", "1,x,3"}, "'x' is not a token id"},
      {{"generate", "--model", model, "--prompt-ids", "1,,3"}, "'' is not a token id"},
      {{"generate", "--model", model, "--prompt-ids=-4"}, "is not a token id"},
      {{"generate", "--model", model, "--prompt-ids", "99999999999"}, "'99999999999' is not a token id"},
      {{"generate", "--model", model, "--prompt-ids", "1,512"}, "id 512 is outside the vocabulary [0, 512)"},
      {{"generate", "--model", model, "--prompt-ids", ""}, "--prompt-ids"},
      {{"generate", "--model", model}, "--prompt TEXT or --prompt-ids"},
      {{"generate", "--model", model, "--prompt", "hello"}, "tokenizer.json"},
      {{"generate", "--model", model, "--prompt", "hello", "--chat"}, "tokenizer.json"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--chat"}, "--chat"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--stop", "x"}, "tokenizer.json"},
      {{"chat", "--model", model}, "tokenizer.json"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--temperature=-1"}, "temperature"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--temperature", "hot"}, "--temperature"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--top-p", "0"}, "top_p"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--top-p", "1.5"}, "top_p"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--min-p", "1"}, "min_p"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--top-k=-2"}, "top_k"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--repetition-penalty", "0"}, "repetition_penalty"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--max-new-tokens=-1"}, "--max-new-tokens"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--threads", "0"}, "--threads"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--mode", "turbo"}, "--mode"},
      {{"generate", "--model", model, "--prompt-ids", "1", "--json", "--mark-prompt-start"}, "--mark-prompt-start"},
      {{"generate", "--model", model, "--prompt-ids", "1,2,3,4,5,6,7,8,9,10", "--max-new-tokens", "250"},
       "prompt of 10 tokens + --max-new-tokens 250 = 260 tokens exceeds the engine's max_context of 256"},
      {{"generate", "--model", "/nonexistent/model", "--prompt-ids", "1"}, "is not a directory"},
      {{"generate", "--prompt-ids", "1"}, "--model"},
      {{}, "generate"},
  };
  for (const BadInput& c : cases) {
    std::string cmd;
    for (const std::string& a : c.args) cmd += a + " ";
    SCOPED_TRACE(cmd);
    const CliRun r = run_cli(test_engine_info(), c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(mi_test::TestModel::live_sequences, 0);
}

TEST(EngineCli, PromptFillingTheContextIsRejectedWithoutMaxNewTokens) {
  const CliRun r = run_cli(test_engine_info(512, 4), {"generate", "--model", kGolden.string(), "--prompt-ids", "1,2,3,4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("prompt of 4 tokens leaves no room"), std::string::npos) << r.err;
}

// A checkpoint that cannot be loaded is bad input: exit 2 with the file named, nothing on stdout.
TEST(EngineCli, BrokenCheckpointIsBadInput) {
  TempDir dir("broken");
  std::ofstream(dir.path() / "config.json") << "{ not json";
  const CliRun r = run_cli(test_engine_info(), {"generate", "--model", dir.path().string(), "--prompt-ids", "1,2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(EngineCli, HelpExitsZero) {
  const CliRun r = run_cli(test_engine_info(), {"generate", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--prompt-ids"), std::string::npos);
}

}  // namespace
