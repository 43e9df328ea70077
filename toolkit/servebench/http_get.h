// One plain GET to the server under test (no keep-alive), for the small side requests serve-bench makes around a
// load level (/v1/models, /metrics). Kept apart from the streaming client (sse_client.h), which times every read.
#pragma once
#include <string>

#include "servebench/loopback_url.h"

namespace mi::servebench {

struct HttpGetResult {
  bool connected = false;  // false: `error` says why (refused, timeout, ...)
  int status = 0;
  std::string body;
  std::string error;
};

// GET url.base_path + path with connection and read timeouts of timeout_s (clamped to [1 ms, 30 s]).
HttpGetResult http_get(const ServerUrl& url, const std::string& path, double timeout_s);

}  // namespace mi::servebench
