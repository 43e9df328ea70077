// The server address of `metainfer serve-bench`: an http:// URL whose host is a loopback name (127.0.0.1, ::1 as
// [::1], localhost). serve-bench only ever loads a server on this machine; anything else is refused as bad input.
#pragma once
#include <string>

namespace mi::servebench {

struct ServerUrl {
  std::string host;       // as given: "127.0.0.1", "::1" (brackets removed) or "localhost"
  int port = 80;
  std::string base_path;  // "" or a prefix without a trailing '/', e.g. "/proxy"; a trailing "/v1" is dropped
  std::string text;       // normalised: http://HOST:PORT[base_path]
};

// Throws mi::Error ("--url: ...") for anything but http://<loopback host>[:port][/path].
ServerUrl parse_loopback_url(const std::string& url);

bool is_loopback_host(const std::string& host);

}  // namespace mi::servebench
