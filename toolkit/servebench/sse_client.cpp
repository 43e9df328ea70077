#include "servebench/sse_client.h"

#include <httplib.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "servebench/openai_stream.h"

namespace mi::servebench {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// httplib takes timeouts as (sec, usec); at least 1 ms.
void split_seconds(double s, time_t& sec, time_t& usec) {
  s = std::max(s, 0.001);
  sec = time_t(s);
  usec = time_t((s - double(sec)) * 1e6);
}

}  // namespace

std::string http_error_message(int status, const std::string& body) {
  std::string detail;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    const nlohmann::json& e = j.contains("error") ? j["error"] : j;
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      detail = e["message"].get<std::string>();
    else if (e.is_string())
      detail = e.get<std::string>();
  }
  if (detail.empty()) detail = body.substr(0, 300) + (body.size() > 300 ? "..." : "");
  return "HTTP " + std::to_string(status) + (detail.empty() ? "" : ": " + detail);
}

SseClient::SseClient(const ServerUrl& url) : url_(url), client_(std::make_unique<httplib::Client>(url.host, url.port)) {
  client_->set_keep_alive(false);
  client_->set_follow_location(false);
  client_->set_tcp_nodelay(true);
}

SseClient::~SseClient() = default;

RequestResult SseClient::post_stream(const std::string& path, const std::string& json_body, double timeout_s, Clock::time_point deadline) {
  const Clock::time_point sent = Clock::now();
  const double budget_s = std::clamp(timeout_s, 0.0, 1e6);  // keeps the time_point arithmetic far from overflow
  const auto own_deadline = sent + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget_s));
  const bool global_first = deadline < own_deadline;
  const Clock::time_point until = global_first ? deadline : own_deadline;
  const std::string timeout_message =
      global_first ? std::string("stopped at the global deadline (--deadline-s)") : "timed out after " + std::to_string(int(timeout_s)) + " s (--timeout-s)";
  OpenAiStream stream(sent);
  if (until <= sent) {
    stream.fail(timeout_message);
    return stream.finish();
  }
  time_t sec, usec;
  split_seconds(seconds(until - sent), sec, usec);
  client_->set_read_timeout(sec, usec);
  client_->set_write_timeout(sec, usec);
  split_seconds(std::min(seconds(until - sent), 10.0), sec, usec);
  client_->set_connection_timeout(sec, usec);

  httplib::Request req;
  req.method = "POST";
  req.path = url_.base_path + path;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = json_body;
  int status = 0;
  std::string error_body;  // the body of a non-200 response (bounded)
  bool timed_out = false;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min(n, 4096 - error_body.size()));
      return true;
    }
    if (now >= until) {
      timed_out = true;
      return false;
    }
    return stream.feed(std::string_view(data, n), now);
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent_ok = client_->send(req, res, error);
  if (status == 0 && res.status > 0) status = res.status;

  if (status != 0 && status != 200) {
    stream.fail(http_error_message(status, error_body.empty() ? res.body : error_body));
  } else if (!sent_ok && !stream.failed()) {
    if (timed_out || Clock::now() >= until)
      stream.fail(timeout_message);
    else
      stream.fail("request failed: " + httplib::to_string(error) + (status == 0 ? " (no response from " + url_.text + ")" : ""));
  }
  RequestResult r = stream.finish();
  r.http_status = status;
  return r;
}

}  // namespace mi::servebench
