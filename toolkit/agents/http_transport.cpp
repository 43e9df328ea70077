#include "agents/http_transport.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mi::agents {
namespace {

void split_seconds(double s, time_t& sec, time_t& usec) {
  s = std::max(s, 0.001);
  sec = time_t(s);
  usec = time_t((s - double(sec)) * 1e6);
}

constexpr std::size_t kMaxErrorBody = 64 * 1024;  // an error page is evidence, not data: keep its start

}  // namespace

EndpointUrl parse_endpoint_url(const std::string& url) {
  EndpointUrl u;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) fail("endpoint URL '", url, "': expected http://host[:port][/path] or https://...");
  u.scheme = url.substr(0, scheme_end);
  if (u.scheme != "http" && u.scheme != "https")
    fail("endpoint URL '", url, "': scheme '", u.scheme, "' is not http or https");
  std::string rest = url.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  u.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  if (authority.empty()) fail("endpoint URL '", url, "': no host");
  u.port = u.scheme == "https" ? 443 : 80;
  // [v6]:port, host:port or host
  std::string host = authority;
  std::string port_text;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) fail("endpoint URL '", url, "': unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port_text = authority.substr(close + 2);
  } else if (const auto colon = authority.rfind(':'); colon != std::string::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (!port_text.empty()) {
    try {
      std::size_t used = 0;
      u.port = std::stoi(port_text, &used);
      if (used != port_text.size() || u.port <= 0 || u.port > 65535) throw std::out_of_range("port");
    } catch (const std::exception&) {
      fail("endpoint URL '", url, "': bad port '", port_text, "'");
    }
  }
  u.host = host;
  u.scheme_host_port = u.scheme + "://" + authority;
  return u;
}

std::string describe_http_failure(const HttpResult& r) {
  if (r.status == 0) return "no response: " + r.error;
  std::string detail;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    const nlohmann::json& e = j.contains("error") ? j["error"] : j;
    if (e.is_object() && e.contains("message") && e["message"].is_string()) detail = e["message"].get<std::string>();
    else if (e.is_string()) detail = e.get<std::string>();
  }
  if (detail.empty()) detail = r.body.substr(0, 300) + (r.body.size() > 300 ? "..." : "");
  return "HTTP " + std::to_string(r.status) + (detail.empty() ? "" : ": " + detail);
}

HttpTransport::HttpTransport(const std::string& base_url, HttpOptions options)
    : url_(parse_endpoint_url(base_url)), options_(options) {}

HttpTransport::~HttpTransport() = default;

HttpResult HttpTransport::post_once(const std::string& path, const std::map<std::string, std::string>& headers,
                                    const std::string& body, const ChunkHandler& on_chunk, bool& delivered,
                                    std::string& retry_after) {
  HttpResult result;
  // A fresh client per attempt: a connection that failed mid-response is not reused.
  httplib::Client client(url_.scheme_host_port);
  client.set_keep_alive(false);
  client.set_follow_location(false);
  time_t sec, usec;
  split_seconds(options_.connect_timeout_s, sec, usec);
  client.set_connection_timeout(sec, usec);
  split_seconds(options_.timeout_s, sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  if (url_.scheme == "https") {
    client.enable_server_certificate_verification(true);  // never talk to an endpoint we cannot authenticate
    if (!options_.ca_cert_file.empty()) client.set_ca_cert_path(options_.ca_cert_file.c_str());
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = url_.base_path + path;
  for (const auto& [k, v] : headers) req.set_header(k, v);
  req.body = body;
  bool timed_out = false;
  req.response_handler = [&](const httplib::Response& r) {
    result.status = r.status;
    retry_after = r.get_header_value("Retry-After");
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    // The socket read timeout bounds silence; this bounds a server that trickles bytes forever.
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      return false;
    }
    if (result.status == 200 && on_chunk) {
      delivered = true;
      return on_chunk(std::string_view(data, n));
    }
    if (result.body.size() < kMaxErrorBody || result.status == 200) result.body.append(data, n);
    return true;
  };
  const httplib::Result r = client.send(req);
  if (timed_out) {
    result.status = 0;
    result.error = "timed out after " + std::to_string(options_.timeout_s) + " s";
  } else if (!r && !(delivered && r.error() == httplib::Error::Canceled)) {
    // Canceled after delivery means on_chunk chose to stop: the caller's decision, not a transport failure. Any
    // other error leaves the response incomplete, whatever status its headers carried (a 200 whose body never
    // came is no answer): status 0, so the retry policy treats it as no response.
    result.error = std::string(delivered ? "stream interrupted: " : result.status ? "incomplete response (HTTP " + std::to_string(result.status) + "): " : "") +
                   httplib::to_string(r.error());
    result.status = 0;
  }
  return result;
}

HttpResult HttpTransport::post(const std::string& path, const std::map<std::string, std::string>& headers,
                               const std::string& body, const ChunkHandler& on_chunk) {
  const RetryPolicy& policy = options_.retry;
  HttpResult last;
  for (int attempt = 1;; ++attempt) {
    bool delivered = false;
    std::string retry_after;
    last = post_once(path, headers, body, on_chunk, delivered, retry_after);
    last.attempts = attempt;
    // A delivered stream that broke mid-way is reported, never retried; so is a 200 that ended cleanly.
    if (delivered) {
      if (!last.error.empty()) last.status = 0;
      return last;
    }
    if (last.status == 200 || !RetryPolicy::retryable(last.status) || attempt >= policy.max_attempts) return last;
    const double wait = policy.delay_s(attempt + 1, parse_retry_after(retry_after));
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
}

std::string post_for_json_text(HttpTransport& http, const std::string& path,
                               const std::map<std::string, std::string>& headers, const std::string& body,
                               const std::string& where, int& attempts) {
  const HttpResult r = http.post(path, headers, body);
  attempts = r.attempts;
  if (r.status != 200)
    fail(where, ": ", describe_http_failure(r), " (after ", r.attempts, " attempt", r.attempts == 1 ? "" : "s", ")");
  if (nlohmann::json::parse(r.body, nullptr, false).is_discarded())
    fail(where, ": response is not JSON: ", r.body.substr(0, 300));
  return r.body;
}

}  // namespace mi::agents
