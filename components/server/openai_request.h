// The body of POST /v1/completions and POST /v1/chat/completions, parsed and checked field by field
// (OpenAI API reference, "Create completion" and "Create chat completion"). Nothing here tokenizes: that needs the
// model's tokenizer and chat template (server/request_preparation.h).
//
// Accepted fields (anything else is ignored, as OpenAI-compatible servers commonly do, so that clients sending
// newer or vendor fields keep working; a known field this server cannot honour is refused with 400 instead, e.g.
// n > 1, echo, best_of, logit_bias, tools, a non-text response_format):
//   both:   model (string, required), max_tokens (int >= 1), temperature [0, 2], top_p (0, 1], top_k (int, 0 or -1
//           = off), min_p [0, 1), repetition_penalty (> 0), seed (int; absent: a random one), stop (string or array of up to 4 non-empty
//           strings), n (1), stream (bool), stream_options.include_usage (bool, only with stream), ignore_eos (bool),
//           return_token_ids (bool: each choice and stream chunk also carries its generated token ids, as vLLM's),
//           presence_penalty / frequency_penalty (only 0), user (string, unused)
//   completions: prompt (string, array of one string, array of token ids, or array of one array of ids),
//                logprobs (int 0..20: that many alternatives per token), echo (false only)
//   chat:   messages (non-empty array of {role, content: string | array of {type: "text", text} | null, name?}),
//           max_completion_tokens (preferred over max_tokens), logprobs (bool), top_logprobs (int 0..20, needs
//           logprobs), chat_template_kwargs (object: extra variables of the chat template, e.g. enable_thinking)
// Defaults follow the OpenAI API: temperature 1, top_p 1; max_tokens = what is left of the context.
// A body nested more than kMaxJsonDepth arrays/objects below its top-level object (level 0) is refused with 400
// while it is parsed: the request is copied and walked recursively later (messages, chat template variables), and a
// 200 KB body of "[[[[..." would otherwise exhaust the HTTP thread's stack and take the server down.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/api_error.h"

namespace mi::server {

enum class Endpoint { completions, chat };

inline constexpr int kMaxLogprobs = 20;  // most alternatives per token a request may ask for
inline constexpr int kMaxJsonDepth = 64;  // most levels of arrays/objects below a request body's top-level object

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;
  // completions: the prompt as text, or as token ids (prompt_is_ids)
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  // chat: the conversation as given (content normalised to a string), and extra template variables
  nlohmann::ordered_json messages;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();

  int max_tokens = -1;  // -1: not given (fill the context)
  std::string max_tokens_param = "max_tokens";  // the field that set it, named in a context-length error
  runtime::SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool return_token_ids = false;
  bool stream = false;
  bool include_usage = false;
  int logprobs = -1;  // -1: no logprobs; else alternatives per token (0: only the chosen token's logprob)
};

// Parses and checks a request body; ApiError 400 naming the field on any problem.
ApiRequest parse_api_request(Endpoint endpoint, std::string_view body);

}  // namespace mi::server
