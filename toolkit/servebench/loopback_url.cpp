#include "servebench/loopback_url.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace mi::servebench {

bool is_loopback_host(const std::string& host) {
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return h == "127.0.0.1" || h == "::1" || h == "localhost";
}

ServerUrl parse_loopback_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    if (url.rfind("https://", 0) == 0) fail("--url: '", url, "': only http:// is supported (serve-bench loads a server on this machine)");
    fail("--url: '", url, "': expected http://127.0.0.1:PORT, http://[::1]:PORT or http://localhost:PORT");
  }
  const std::string rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) fail("--url: '", url, "': user information in the URL is not accepted");
  if (path.find_first_of("?#") != std::string::npos) fail("--url: '", url, "': a query or fragment is not accepted");

  ServerUrl out;
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:PORT
    const std::size_t close = authority.find(']');
    if (close == std::string::npos) fail("--url: '", url, "': unbalanced '[' in the host");
    out.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail("--url: '", url, "': expected ':PORT' after the host");
      port_text = after.substr(1);
      if (port_text.empty()) fail("--url: '", url, "': empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) fail("--url: '", url, "': empty port");
      if (port_text.find(':') != std::string::npos)
        fail("--url: '", url, "': an IPv6 host must be bracketed, e.g. http://[::1]:8000");
    }
  }
  if (out.host.empty()) fail("--url: '", url, "': no host");
  if (!is_loopback_host(out.host))
    fail("--url: refusing host '", out.host, "': serve-bench only loads a server on this machine (127.0.0.1, [::1] or localhost)");
  if (!port_text.empty()) {
    if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c); }))
      fail("--url: '", url, "': port '", port_text, "' is not a number in 1..65535");
    out.port = std::stoi(port_text);
    if (out.port < 1 || out.port > 65535) fail("--url: '", url, "': port ", out.port, " is not in 1..65535");
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) path.resize(path.size() - 3);
  out.base_path = path;
  const bool v6 = out.host.find(':') != std::string::npos;
  out.text = "http://" + (v6 ? "[" + out.host + "]" : out.host) + ":" + std::to_string(out.port) + out.base_path;
  return out;
}

}  // namespace mi::servebench
