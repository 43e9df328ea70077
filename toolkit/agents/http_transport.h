// POSTs JSON to an LLM endpoint with the retry policy, timeouts and (for streamed responses) a body callback.
// httplib stays inside http_transport.cpp, as in servebench: headers that include httplib.h cost every includer
// seconds of compile time.
//
// https works when cpp-httplib was built with OpenSSL (Debian's libcpp-httplib-dev is: its pkg-config Cflags define
// CPPHTTPLIB_OPENSSL_SUPPORT); server certificates are verified against the system store.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "agents/retry_policy.h"

namespace mi::agents {

// "http://host:port/base" split for httplib. Throws mi::Error naming the URL for a scheme other than http/https.
struct EndpointUrl {
  std::string scheme;            // "http" | "https"
  std::string host;
  int port = 0;
  std::string base_path;         // no trailing '/': "" or "/v1"
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
};
EndpointUrl parse_endpoint_url(const std::string& url);

struct HttpOptions {
  double timeout_s = 300;          // per request: connect + the whole response (a streamed one too)
  double connect_timeout_s = 10;
  std::string ca_cert_file;  // https: trust this PEM bundle instead of the system store (a private endpoint's CA)
  RetryPolicy retry;
};

struct HttpResult {
  int status = 0;       // 0: no response at all (see error)
  std::string body;     // the whole body (non-streamed, or an error response of a streamed request)
  int attempts = 0;
  std::string error;    // transport error of the last attempt, when status is 0
};

class HttpTransport {
 public:
  HttpTransport(const std::string& base_url, HttpOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Receives the body of a 200 response piece by piece; return false to abort.
  using ChunkHandler = std::function<bool(std::string_view)>;

  // POSTs `body` to base_path + path. Retries what RetryPolicy::retryable says, waiting as it says; a streamed
  // request is retried only before its first byte reached `on_chunk` (a half-delivered stream cannot be replayed
  // without the caller seeing it twice). Returns the last result; the caller turns a non-200 into its error.
  HttpResult post(const std::string& path, const std::map<std::string, std::string>& headers, const std::string& body,
                  const ChunkHandler& on_chunk = {});

  const EndpointUrl& url() const { return url_; }

 private:
  HttpResult post_once(const std::string& path, const std::map<std::string, std::string>& headers,
                       const std::string& body, const ChunkHandler& on_chunk, bool& delivered, std::string& retry_after);

  EndpointUrl url_;
  HttpOptions options_;
};

// "HTTP 500: <error.message of the JSON body, or its first bytes>"
std::string describe_http_failure(const HttpResult& r);

// A non-streamed call both APIs share: POST, then the 200 body as JSON. mi::Error naming `where` (e.g.
// "POST https://host/v1/messages") and the attempts for a non-200 or a body that is not JSON. `attempts` gets the
// number of attempts made.
std::string post_for_json_text(HttpTransport& http, const std::string& path,
                               const std::map<std::string, std::string>& headers, const std::string& body,
                               const std::string& where, int& attempts);

}  // namespace mi::agents
