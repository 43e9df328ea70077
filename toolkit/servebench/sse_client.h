// The HTTP side of one streamed request: POSTs a JSON body to the server and feeds the body, piece by piece as
// httplib's content receiver hands it over, to an OpenAiStream. Bounded: the request is abandoned at
// min(send + timeout_s, deadline) (checked on every piece; a silent server is cut off by the socket read timeout,
// set to the same budget). Never retries. httplib stays inside sse_client.cpp.
#pragma once
#include <memory>
#include <string>

#include "servebench/loopback_url.h"
#include "servebench/request_result.h"

namespace httplib {
class Client;
}

namespace mi::servebench {

class SseClient {
 public:
  explicit SseClient(const ServerUrl& url);
  ~SseClient();
  SseClient(const SseClient&) = delete;
  SseClient& operator=(const SseClient&) = delete;

  // `path` is appended to the URL's base path ("/v1/completions").
  RequestResult post_stream(const std::string& path, const std::string& json_body, double timeout_s, Clock::time_point deadline);

 private:
  ServerUrl url_;
  std::unique_ptr<httplib::Client> client_;
};

// The message of an error response body: its OpenAI error.message when it is JSON, else its first bytes.
std::string http_error_message(int status, const std::string& body);

}  // namespace mi::servebench
