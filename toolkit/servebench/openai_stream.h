// One OpenAI-compatible streamed response (/v1/completions or /v1/chat/completions, "stream": true) turned into a
// RequestResult: the SSE events are parsed as they arrive (any split of the bytes), each JSON chunk timestamped.
// A content chunk is one whose choices[0].text, or choices[0].delta.content (also delta.reasoning_content /
// delta.reasoning, which reasoning servers stream before the answer), is a non-empty string. An `error` object, a
// chunk that is not JSON, or a stream without "data: [DONE]" or without content fails the request.
#pragma once
#include <string_view>

#include "servebench/request_result.h"
#include "servebench/sse_parser.h"

namespace mi::servebench {

class OpenAiStream {
 public:
  explicit OpenAiStream(Clock::time_point sent);

  // Bytes of the response body received at `now`. False once the request has failed (stop reading).
  bool feed(std::string_view bytes, Clock::time_point now);
  // The body ended. Completes the checks (DONE seen, some content) and returns the result.
  RequestResult finish();
  // Fails the request with `message` unless it has already failed (timeouts, transport errors).
  void fail(const std::string& message);

  bool failed() const { return !result_.error.empty(); }
  const RequestResult& partial() const { return result_; }

 private:
  bool event(std::string_view data);

  Clock::time_point sent_;
  Clock::time_point now_{};
  Clock::time_point last_content_{};
  SseParser parser_;
  RequestResult result_;
};

}  // namespace mi::servebench
