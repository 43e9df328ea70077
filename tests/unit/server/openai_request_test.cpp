// Parsing of completion and chat completion bodies: accepted shapes, OpenAI defaults, and a 400 naming the field
// for every kind of bad input.
#include <gtest/gtest.h>

#include <string>

#include "server/openai_request.h"
#include "server/openai_response.h"

namespace mi::server {
namespace {

ApiError error_of(Endpoint e, const std::string& body) {
  try {
    parse_api_request(e, body);
  } catch (const ApiError& err) {
    return err;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

TEST(OpenAiRequest, CompletionWithTextPromptAndDefaults) {
  const ApiRequest r = parse_api_request(Endpoint::completions, R"({"model": "m", "prompt": "Hello"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);  // OpenAI's default
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.logprobs, -1);
}

TEST(OpenAiRequest, PromptAsTokenIdsInEveryAcceptedShape) {
  for (const char* prompt : {"[1, 2, 3]", "[[1, 2, 3]]"}) {
    const ApiRequest r = parse_api_request(Endpoint::completions, std::string(R"({"model": "m", "prompt": )") + prompt + "}");
    EXPECT_TRUE(r.prompt_is_ids);
    EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  }
  const ApiRequest one = parse_api_request(Endpoint::completions, R"({"model": "m", "prompt": ["text"]})");
  EXPECT_EQ(one.prompt_text, "text");
}

TEST(OpenAiRequest, SamplingFieldsAndStreamOptions) {
  const ApiRequest r = parse_api_request(
      Endpoint::completions,
      R"({"model": "m", "prompt": "x", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": -1, "min_p": 0.1,
          "seed": 42, "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true}, "logprobs": 3,
          "ignore_eos": true, "unknown_vendor_field": {"x": 1}})");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(OpenAiRequest, ChatMessagesWithTextPartsAndCompletionTokens) {
  const ApiRequest r = parse_api_request(
      Endpoint::chat,
      R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
          "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 2,
          "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "Hi there");
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(OpenAiRequest, EveryBadFieldIsA400NamingIt) {
  struct Case {
    Endpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::completions, R"({"prompt": "x"})", "model"},
      {Endpoint::completions, R"({"model": 3, "prompt": "x"})", "model"},
      {Endpoint::completions, R"({"model": "m"})", "prompt"},
      {Endpoint::completions, R"({"model": "m", "prompt": 5})", "prompt"},
      {Endpoint::completions, R"({"model": "m", "prompt": []})", "prompt"},
      {Endpoint::completions, R"({"model": "m", "prompt": [1, -2]})", "prompt"},
      {Endpoint::completions, R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "max_tokens": 0})", "max_tokens"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "max_tokens": "5"})", "max_tokens"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "max_tokens": 2.5})", "max_tokens"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "temperature": -1})", "temperature"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "top_p": 0})", "top_p"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "min_p": 1})", "min_p"},
      // In range as doubles, out of range as the floats the sampler holds (inf, 0, 1): refused here, not by the
      // serving loop after the 200.
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "repetition_penalty": 1e300})", "repetition_penalty"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "repetition_penalty": 1e-50})", "repetition_penalty"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "top_p": 1e-50})", "top_p"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "min_p": 0.99999999999})", "min_p"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "stop": ""})", "stop"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "stop": ["a","b","c","d","e"]})", "stop"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "stream": "yes"})", "stream"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "n": 2})", "n"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "logprobs": 21})", "logprobs"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "presence_penalty": 0.5})", "presence_penalty"},
      {Endpoint::completions, R"({"model": "m", "prompt": "x", "logit_bias": {"1": 5}})", "logit_bias"},
      {Endpoint::chat, R"({"model": "m"})", "messages"},
      {Endpoint::chat, R"({"model": "m", "messages": []})", "messages"},
      {Endpoint::chat, R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0].role"},
      {Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0].type"},
      {Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.endpoint, c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << " -> " << e.what();
    EXPECT_EQ(e.to_json()["error"]["type"], "invalid_request_error");
  }
}

TEST(OpenAiRequest, MalformedJsonAndNonObjectBodies) {
  for (const char* body : {"{", "", "[1,2]", "\"text\"", "{\"model\": \"m\",}"}) {
    const ApiError e = error_of(Endpoint::completions, body);
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_TRUE(e.param().empty());
  }
}

// Deep nesting is refused while parsing, before anything copies or walks the value recursively (a copy of a
// 200000-deep array would overflow the stack). Levels count from the top-level object (level 0): in a chat body the
// messages array is level 1, a message level 2, so a message key may hold kMaxJsonDepth - 2 nested arrays.
TEST(OpenAiRequest, NestingDeeperThanTheLimitIsRefused) {
  const auto nested = [](int n) { return std::string(std::size_t(n), '[') + std::string(std::size_t(n), ']'); };
  const auto chat = [&](int n) { return R"({"model": "m", "messages": [{"role": "user", "content": "x", "k": )" + nested(n) + "}]}"; };
  EXPECT_EQ(parse_api_request(Endpoint::chat, chat(kMaxJsonDepth - 2)).messages[0]["k"].size(), 1u);
  for (int n : {kMaxJsonDepth - 1, 200000}) {
    const ApiError e = error_of(Endpoint::chat, chat(n));
    EXPECT_EQ(e.status(), 400) << n;
    EXPECT_NE(std::string(e.what()).find("deeper than 64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_of(Endpoint::completions, R"({"model": "m", "prompt": "x", "u": )" + nested(200000) + "}").status(), 400);
}

TEST(OpenAiRequest, NullMeansNotGiven) {
  const ApiRequest r = parse_api_request(Endpoint::completions,
                                         R"({"model": "m", "prompt": "x", "max_tokens": null, "temperature": null})");
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
}

}  // namespace
}  // namespace mi::server

// A byte-level token that is only part of a UTF-8 character is written as OpenAI writes it, never as U+FFFD (which
// would also merge distinct partial tokens into one top_logprobs key).
TEST(TokenString, PartialCharactersAreWrittenAsBytes) {
  EXPECT_EQ(mi::server::token_string("hello"), "hello");
  EXPECT_EQ(mi::server::token_string("\xe2\x82\xac"), "\xe2\x82\xac");  // a whole character stays itself
  EXPECT_EQ(mi::server::token_string("\xe2\x82"), "bytes:\\xe2\\x82");
  EXPECT_EQ(mi::server::token_string("a\xff"), "bytes:\\x61\\xff");
  EXPECT_NE(mi::server::token_string("\xe2"), mi::server::token_string("\xe3"));
}
