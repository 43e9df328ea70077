// Response bodies and stream chunks in the OpenAI shapes (API reference: "The completion object", "The chat
// completion object", "The chat completion chunk object"):
//
//   completions   {"id": "cmpl-…", "object": "text_completion", "created": s, "model": m,
//                  "choices": [{"index": 0, "text": t, "logprobs": null | {...}, "finish_reason": "stop"|"length"}],
//                  "usage": {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}}
//   chat          ... "object": "chat.completion", choices[0] = {"index": 0, "message": {"role": "assistant",
//                  "content": t}, "logprobs": null | {"content": [...]}, "finish_reason": ...}
//   stream        one chunk per event ("object": "text_completion" or "chat.completion.chunk", the same id and created
//                  in every chunk, finish_reason null until the last choice chunk; chat opens with a delta
//                  {"role": "assistant", "content": ""}); with stream_options.include_usage every chunk has
//                  "usage": null and a last chunk has "choices": [] and the usage.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"
#include "server/request_channel.h"

namespace mi::server {

struct ResponseIdentity {
  Endpoint endpoint = Endpoint::completions;
  std::string id;       // "cmpl-<hex>" or "chatcmpl-<hex>"
  long long created = 0;  // Unix seconds
  std::string model;
};

// A fresh identity: random 96-bit id with the endpoint's prefix, the current time.
ResponseIdentity new_identity(Endpoint endpoint, const std::string& model);

// A token's text as a JSON string: itself when it is valid UTF-8, else "bytes:\\xNN..." (OpenAI's form for a
// partial character); logprobs carry the exact bytes separately.
std::string token_string(const std::string& text);

nlohmann::ordered_json usage_json(const Usage& usage);

// The whole response of a non-streamed request. logprobs: every token's (empty and `with_logprobs` false: null).
// token_ids: the generated ids, added to the choice as "token_ids" when not null (return_token_ids).
nlohmann::ordered_json completion_response(const ResponseIdentity& who, const std::string& text,
                                           const std::string& finish_reason, const Usage& usage,
                                           const std::vector<TokenLogprob>& logprobs, bool with_logprobs,
                                           const std::vector<int32_t>* token_ids);

// A streamed chunk: new text (and its tokens' logprobs), with finish_reason "" for none.
// `text_offset` (completions logprobs) is the length of the text sent before this chunk.
nlohmann::ordered_json stream_chunk(const ResponseIdentity& who, const std::string& text,
                                    const std::vector<TokenLogprob>& logprobs, bool with_logprobs,
                                    const std::string& finish_reason, bool include_usage, std::size_t text_offset,
                                    const std::vector<int32_t>* token_ids);
// Chat only: the opening chunk, delta {"role": "assistant", "content": ""}.
nlohmann::ordered_json chat_role_chunk(const ResponseIdentity& who, bool include_usage);
// The final usage chunk ("choices": []).
nlohmann::ordered_json usage_chunk(const ResponseIdentity& who, const Usage& usage);

}  // namespace mi::server
