// The engine command line on a checkpoint with tokenizer files: a random tiny Qwen3 written by
// `metainfer synth-model` (real Qwen3 tokenizer and chat template), run in-process through the test model.
// Checks text prompts (post-processor applied), --chat (chat template), decoded and streamed text, --stop, the
// interactive chat subcommand, fast mode.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../engine/cli_run.h"
#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using mi_test::CliRun;
using mi_test::join_ids;
using mi_test::run_cli;

class EngineText : public ::testing::Test {
 protected:
  // The checkpoint: `metainfer synth-model --family qwen3 --preset tiny --seed 0`, written at build time beside its
  // emitted model (CMakeLists.txt, build/emitted/synth-qwen3-tiny).
  static void SetUpTestSuite() {
    model_ = METAINFER_SYNTH_QWEN3_TINY;
    ASSERT_TRUE(fs::exists(model_ / "tokenizer.json")) << "synth-model wrote no tokenizer; run ./setup.sh";
  }

  static mi::engine::EngineInfo info() { return mi_test::test_engine_info(151936, 256); }

  static nlohmann::json generate_json(std::vector<std::string> args) {
    std::vector<std::string> full{"generate", "--model", model_.string(), "--json"};
    full.insert(full.end(), args.begin(), args.end());
    const CliRun r = run_cli(info(), full);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }

  static inline fs::path model_;
};

TEST_F(EngineText, TextPromptIsEncodedWithPostProcessorAndOutputDecoded) {
  const mi::tok::Tokenizer tok = mi::tok::Tokenizer::load(model_);
  const nlohmann::json j = generate_json({"--prompt", "Hello, world! héllo", "--max-new-tokens", "12"});
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), tok.encode("Hello, world! héllo", true));
  const auto out = j.at("output_ids").get<std::vector<int32_t>>();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(j.at("text"), tok.decode(out, /*skip_special=*/true));
  EXPECT_EQ(j.at("tokenizer"), true);
  EXPECT_TRUE(j.at("finish_reason") == "length" || j.at("finish_reason") == "eos");
}

TEST_F(EngineText, PlainOutputStreamsTheSameText) {
  const nlohmann::json j = generate_json({"--prompt", "Once upon a time", "--max-new-tokens", "16"});
  const CliRun r = run_cli(info(), {"generate", "--model", model_.string(), "--prompt", "Once upon a time",
                                    "--max-new-tokens", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, j.at("text").get<std::string>() + "\n");
}

TEST_F(EngineText, ChatFlagRendersTheChatTemplate) {
  const mi::tok::Tokenizer tok = mi::tok::Tokenizer::load(model_);
  const mi::chat::ChatTemplate tmpl = mi::chat::ChatTemplate::load(model_);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "What is 2+2?"}});
  const std::string rendered = tmpl.render(messages, nullptr, true, nlohmann::ordered_json::object());
  ASSERT_NE(rendered.find("<|im_start|>assistant\n"), std::string::npos);
  const nlohmann::json j = generate_json({"--prompt", "What is 2+2?", "--chat", "--max-new-tokens", "4"});
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), tok.encode(rendered, false));
}

TEST_F(EngineText, StopStringEndsTheTextBeforeIt) {
  const nlohmann::json full = generate_json({"--prompt", "The weather today", "--max-new-tokens", "24"});
  const std::string text = full.at("text");
  ASSERT_GE(text.size(), 8u) << "the random model produced too little text to pick a stop string from";
  std::size_t at = text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;  // start of a character
  std::size_t len = 3;
  while (at + len < text.size() && (static_cast<unsigned char>(text[at + len]) & 0xC0) == 0x80) ++len;
  const std::string stop = text.substr(at, len);
  const std::string expected = text.substr(0, text.find(stop));
  const nlohmann::json j = generate_json({"--prompt", "The weather today", "--max-new-tokens", "24", "--stop", stop,
                                          "--stop", "never-generated-\x01"});
  EXPECT_EQ(j.at("finish_reason"), "stop");
  EXPECT_EQ(j.at("text"), expected);
  // generation stopped at the token completing the stop string, not later
  EXPECT_LT(j.at("output_ids").size(), full.at("output_ids").size() + 1);
  const CliRun r = run_cli(info(), {"generate", "--model", model_.string(), "--prompt", "The weather today",
                                    "--max-new-tokens", "24", "--stop", stop});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected + "\n");  // streamed output never shows any part of the stop string
}

TEST_F(EngineText, ChatSubcommandHoldsAMultiTurnConversation) {
  const CliRun r = run_cli(info(), {"chat", "--model", model_.string(), "--max-new-tokens", "6"},
                           "Hello\n\nHow are you?\n/exit\nnot read\n");
  ASSERT_EQ(r.code, 0) << r.err;
  // The same two turns by hand: turn 1 is generate --chat; turn 2 renders the conversation so far.
  const nlohmann::json t1 = generate_json({"--prompt", "Hello", "--chat", "--max-new-tokens", "6"});
  const mi::tok::Tokenizer tok = mi::tok::Tokenizer::load(model_);
  const mi::chat::ChatTemplate tmpl = mi::chat::ChatTemplate::load(model_);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "Hello"}});
  messages.push_back({{"role", "assistant"}, {"content", t1.at("text").get<std::string>()}});
  messages.push_back({{"role", "user"}, {"content", "How are you?"}});
  const std::vector<int32_t> ids = tok.encode(tmpl.render(messages, nullptr, true, nlohmann::ordered_json::object()), false);
  std::vector<int> ids_int(ids.begin(), ids.end());
  const nlohmann::json t2 = generate_json({"--prompt-ids", join_ids(ids_int), "--max-new-tokens", "6"});
  EXPECT_EQ(r.out, t1.at("text").get<std::string>() + "\n" + t2.at("text").get<std::string>() + "\n");
}

TEST_F(EngineText, ChatEndsAtEndOfInput) {
  const CliRun r = run_cli(info(), {"chat", "--model", model_.string(), "--max-new-tokens", "2"}, "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(EngineText, ChatTurnThatCannotFitTheContextExitsTwo) {
  const CliRun r = run_cli(info(), {"chat", "--model", model_.string(), "--max-new-tokens", "250"}, "Hello\n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the conversation no longer fits"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_context of 256"), std::string::npos) << r.err;
}

// An engine generated without runtime.chat has no chat template interpreter: `chat` and `--chat` are refused with
// exit 2 and a message saying how to get them, before anything is loaded; plain prompts still work.
TEST_F(EngineText, EngineWithoutChatRefusesChatAndSaysHowToGetIt) {
  using mi::engine::NoChat;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"chat", "--model", model_.string(), "--max-new-tokens", "2"},
        std::vector<std::string>{"generate", "--model", model_.string(), "--prompt", "Hello", "--chat"}}) {
    const CliRun r = mi_test::run_cli<NoChat>(info(), args, "Hello\n");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("no chat template interpreter"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("chat = true"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const CliRun plain = mi_test::run_cli<NoChat>(
      info(), {"generate", "--model", model_.string(), "--prompt", "Hello", "--max-new-tokens", "3", "--json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out).at("output_ids"),
            generate_json({"--prompt", "Hello", "--max-new-tokens", "3"}).at("output_ids"));
}

TEST_F(EngineText, InvalidUtf8PromptExitsTwo) {
  for (const bool chat : {false, true}) {
    std::vector<std::string> args{"generate", "--model", model_.string(), "--prompt", "abc\xff", "--max-new-tokens", "1"};
    if (chat) args.push_back("--chat");
    const CliRun r = run_cli(info(), args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--prompt"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(EngineText, FastModeRuns) {
  const nlohmann::json j = generate_json({"--prompt", "Hi", "--max-new-tokens", "4", "--mode", "fast"});
  EXPECT_EQ(j.at("mode"), "fast");
  EXPECT_FALSE(j.at("output_ids").empty());
}

TEST_F(EngineText, PromptIdBeyondTokenizerButInsideModelVocabIsAccepted) {
  // Qwen3 pads its embeddings past the tokenizer's last id; such ids are valid model input.
  const nlohmann::json j = generate_json({"--prompt-ids", "151935", "--max-new-tokens", "1"});
  EXPECT_EQ(j.at("completion_tokens"), 1);
}

}  // namespace
