// The generation loop (engine/generation.h) on the golden checkpoints through the test model: every prompt, fed
// whole or in chunks, gives its reference greedy ids with exactly one forward call per chunk and per decoded token,
// and its sequence is given back; bad requests are refused before the model is touched; and the stop-string filter
// on streamed text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generation.h"
#include "engine/stop_text.h"
#include "test_model.h"

namespace {

namespace fs = std::filesystem;
using mi::engine::GenerationCallbacks;
using mi::engine::GenerationLimits;
using mi::engine::GenerationRequest;
using mi::engine::StopTextFilter;
using mi_test::TestModel;

struct Case {
  std::vector<GenerationRequest> requests;
  std::vector<std::vector<int32_t>> greedy;
};

Case golden_case(const std::string& name, int max_new_tokens) {
  std::ifstream in(fs::path(METAINFER_TEST_DATA) / "golden" / name / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  Case c;
  for (const auto& p : trace.at("prompts")) {
    GenerationRequest r;
    r.prompt_ids = p.at("prompt_ids").get<std::vector<int32_t>>();
    r.max_new_tokens = max_new_tokens;
    c.requests.push_back(r);
    c.greedy.push_back(p.at("greedy_ids").get<std::vector<int32_t>>());
  }
  return c;
}

TEST(Generation, WholeAndChunkedPromptsMatchTheirGreedyTrace) {
  for (const std::string name : {"qwen3-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    const Case c = golden_case(name, 32);
    ASSERT_EQ(c.requests.size(), 3u);
    mi::engine::RuntimeOptions options;
    options.max_context = 256;
    TestModel model(fs::path(METAINFER_TEST_DATA) / "golden" / name, options);
    for (const int chunk : {0, 7}) {
      for (std::size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE("chunk " + std::to_string(chunk) + ", prompt " + std::to_string(i));
        std::vector<int32_t> streamed;
        mi::engine::GenerationCallbacks callbacks;
        callbacks.on_token = [&](int32_t id) { streamed.push_back(id); };
        const long calls_before = TestModel::forward_calls;
        const auto r = mi::engine::generate(model, nullptr, {256, chunk}, c.requests[i], callbacks);
        EXPECT_EQ(r.output_ids, c.greedy[i]);
        EXPECT_EQ(streamed, c.greedy[i]);
        EXPECT_EQ(r.prompt_ids, c.requests[i].prompt_ids);
        EXPECT_EQ(r.finish_reason, mi::runtime::FinishReason::length);
        EXPECT_GT(r.ttft_ms, 0.0);
        // one forward call per prefill chunk (ceil(prompt / chunk), 1 when whole) + one per decoded token after the first
        const long prefill_calls = chunk ? long((c.requests[i].prompt_ids.size() + 6) / 7) : 1;
        EXPECT_EQ(TestModel::forward_calls - calls_before, prefill_calls + 31);
        EXPECT_EQ(TestModel::live_sequences, 0);
      }
    }
  }
}

TEST(Generation, EosFinishesTheRequestAndIsKept) {
  const Case c = golden_case("qwen3-tiny", 32);
  mi::engine::RuntimeOptions options;
  options.max_context = 256;
  // The greedy trace's 5th id made an end-of-sequence id for this run: generation stops there, with it.
  struct EosModel : TestModel {
    using TestModel::TestModel;
    int32_t eos = 0;
    std::vector<int> eos_token_ids() const { return {eos}; }
  };
  EosModel eos_model(fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny", options);
  eos_model.eos = c.greedy[0][4];
  const auto r = mi::engine::generate(eos_model, nullptr, {256, 0}, c.requests[0]);
  const std::vector<int32_t> expected(c.greedy[0].begin(), c.greedy[0].begin() + 5);
  EXPECT_EQ(r.output_ids, expected);
  EXPECT_EQ(r.finish_reason, mi::runtime::FinishReason::eos);
  EXPECT_EQ(TestModel::live_sequences, 0);
}

TEST(Generation, ZeroNewTokensFinishesWithoutRunningTheModel) {
  const Case c = golden_case("qwen3-tiny", 0);
  TestModel model(fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny", {});
  const long calls_before = TestModel::forward_calls;
  const auto r = mi::engine::generate(model, nullptr, {}, c.requests[0]);
  EXPECT_TRUE(r.output_ids.empty());
  EXPECT_EQ(r.finish_reason, mi::runtime::FinishReason::length);
  EXPECT_EQ(TestModel::forward_calls, calls_before);
}

TEST(Generation, RejectedRequestsThrowAndLeaveNoSequence) {
  TestModel model(fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny", {});
  const long calls_before = TestModel::forward_calls;
  GenerationRequest r;
  r.prompt_ids = {1, 2, 3};
  r.max_new_tokens = 4;
  r.stop = {"x"};  // no tokenizer: stop strings cannot be checked
  EXPECT_THROW(mi::engine::generate(model, nullptr, {}, r), mi::Error);
  r.stop.clear();
  r.max_new_tokens = 600;  // beyond max_context 512
  try {
    mi::engine::generate(model, nullptr, {}, r);
    ADD_FAILURE() << "expected a rejection";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_context 512"), std::string::npos) << e.what();
  }
  r.max_new_tokens = 4;
  r.prompt_ids.clear();
  EXPECT_THROW(mi::engine::generate(model, nullptr, {}, r), mi::Error);
  EXPECT_EQ(TestModel::forward_calls, calls_before);
  EXPECT_EQ(TestModel::live_sequences, 0);
}

// The prompt-start callback (what ENGINE generate --mark-prompt-start writes): once per accepted request, before its
// first token; never for a request that is rejected.
TEST(Generation, PromptStartComesOnceBeforeTheFirstTokenAndNotForARejectedRequest) {
  const Case c = golden_case("qwen3-tiny", 0);
  TestModel model(fs::path(METAINFER_TEST_DATA) / "golden" / "qwen3-tiny", {});
  std::vector<std::string> events;
  GenerationCallbacks callbacks;
  callbacks.on_prompt_start = [&] { events.push_back("start"); };
  callbacks.on_token = [&](int32_t) { events.push_back("token"); };
  GenerationRequest r = c.requests[0];
  r.max_new_tokens = 3;
  mi::engine::generate(model, nullptr, {}, r, callbacks);
  EXPECT_EQ(events, (std::vector<std::string>{"start", "token", "token", "token"}));
  events.clear();
  GenerationLimits bad_chunk;
  bad_chunk.prefill_chunk = -1;
  EXPECT_THROW(mi::engine::generate(model, nullptr, bad_chunk, r, callbacks), mi::Error);
  r.max_new_tokens = 600;  // beyond max_context 512
  EXPECT_THROW(mi::engine::generate(model, nullptr, {}, r, callbacks), mi::Error);
  EXPECT_TRUE(events.empty());
}

// ---- StopTextFilter --------------------------------------------------------------------------------------------

std::string feed_all(StopTextFilter& f, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += f.push(p);
  return out + f.finish();
}

TEST(StopText, NoStopStringsPassesTextThrough) {
  StopTextFilter f({});
  EXPECT_EQ(f.push("ab"), "ab");
  EXPECT_EQ(f.push("c"), "c");
  EXPECT_EQ(f.finish(), "");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.text(), "abc");
}

TEST(StopText, HoldsPossibleStartOfStopString) {
  StopTextFilter f({"END"});
  EXPECT_EQ(f.push("abcE"), "abc");
  EXPECT_EQ(f.push("N"), "");
  EXPECT_EQ(f.push("x"), "ENx");  // not the stop string after all
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push("E"), "");
  EXPECT_EQ(f.finish(), "E");  // end of input: held text is final
  EXPECT_EQ(f.text(), "abcENxE");
}

TEST(StopText, StopsBeforeStopStringAcrossPieces) {
  StopTextFilter f({"END", "\n\n"});
  std::string printed = f.push("one E");
  printed += f.push("N");
  printed += f.push("D two");
  EXPECT_TRUE(f.stopped());
  printed += f.push("more");
  printed += f.finish();
  EXPECT_EQ(printed, "one ");
  EXPECT_EQ(f.text(), "one ");
}

TEST(StopText, EarliestOfSeveralStopStringsWins) {
  StopTextFilter f({"cd", "b"});
  EXPECT_EQ(feed_all(f, {"abcd"}), "a");
  EXPECT_TRUE(f.stopped());
}

TEST(StopText, StopStringAtTheVeryStart) {
  StopTextFilter f({"Hi"});
  EXPECT_EQ(feed_all(f, {"H", "i there"}), "");
  EXPECT_TRUE(f.stopped());
}

TEST(StopText, MultibyteStopString) {
  StopTextFilter f({"é!"});
  EXPECT_EQ(f.push("caf"), "caf");
  EXPECT_EQ(f.push("é"), "");
  EXPECT_EQ(f.push("!"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.text(), "caf");
}

TEST(StopText, EmptyStopStringIsAnError) { EXPECT_THROW(StopTextFilter({""}), mi::Error); }

}  // namespace
