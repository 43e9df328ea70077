// The OpenAI-compatible HTTP front end (server/http_server.h): routes, request checking, SSE streaming and error
// objects on cpp-httplib. Non-template (the serving loop is behind RequestSink), so it is compiled once into
// engine_core and every serve engine shares the object.
#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace mi::server {

struct HttpFrontEnd::Impl {
  Impl(RequestSink& loop, PreparationContext context, ServerMetrics& metrics, HttpOptions options)
      : loop_(loop), context_(std::move(context)), metrics_(metrics), options_(std::move(options)) {
    const int threads = options_.http_threads;
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(std::size_t(threads)); };
    server_.set_payload_max_length(options_.max_body_bytes);
    server_.set_keep_alive_max_count(1000);
    routes();
  }

  // Binds the listening socket; returns the port (mi::Error when the address cannot be bound).
  int bind() {
    const int port = options_.port == 0 ? server_.bind_to_any_port(options_.host)
                                        : (server_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port < 0)
      fail("serve: cannot listen on ", options_.host, ":", options_.port, " (address in use, or not a local address)");
    return port;
  }
  // Serves until stop(); false when the listening loop failed.
  bool listen() { return server_.listen_after_bind(); }
  void stop() { server_.stop(); }
  // Responses still being produced (a drain waits for 0 before stop()).
  int in_flight() const { return in_flight_.load(); }

  using Json = nlohmann::ordered_json;

  // What a streamed or deferred response needs across the content provider's calls.
  struct Pending {
    std::shared_ptr<RequestChannel> channel;
    ResponseIdentity who;
    const char* route = "";
    bool stream = false;
    bool include_usage = false;
    bool with_logprobs = false;
    bool token_ids = false;  // return_token_ids
    bool role_sent = false;
    bool done = false;
    bool failed = false;  // ended with an error object after the 200 header went out
    std::size_t text_sent = 0;
    std::string text;                    // non-streamed: everything so far
    std::vector<TokenLogprob> logprobs;  // non-streamed: everything so far
    std::vector<int32_t> ids;            // non-streamed: everything so far (return_token_ids)
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };

  void send_json(httplib::Response& res, int status, const Json& body) {
    res.status = status;
    res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
  }

  void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status(), e.to_json()); }

  void routes() {
    server_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool draining = loop_.draining();
      send_json(res, draining ? 503 : 200, {{"status", draining ? "draining" : "ok"}});
      metrics_.count_request("/health", res.status);
    });
    server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"object", "list"}, {"data", Json::array({model_card()})}});
      metrics_.count_request("/v1/models", 200);
    });
    server_.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] == context_.model_name) send_json(res, 200, model_card());
      else send_error(res, ApiError(404, "invalid_request_error", "The model '" + std::string(req.matches[1]) +
                                                                      "' does not exist", "model", "model_not_found"));
      metrics_.count_request("/v1/models", res.status);
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_.render(loop_.gauges()), "text/plain; version=0.0.4");
      metrics_.count_request("/metrics", 200);
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::completions, "/v1/completions", req, res);
    });
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::chat, "/v1/chat/completions", req, res);
    });
    // Unknown routes, oversized bodies and other failures httplib answers itself get an error object too.
    server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const int status = res.status;
      if (status == 404) {
        send_error(res, ApiError(404, "invalid_request_error", "no route " + req.method + " " + req.path +
                                                                   " (see GET /v1/models, POST /v1/completions, "
                                                                   "POST /v1/chat/completions)"));
      } else if (status == 413) {
        // cpp-httplib caps form-encoded bodies (curl -d without a Content-Type) at 8 KiB whatever the limit.
        const bool form = req.get_header_value("Content-Type").find("application/x-www-form-urlencoded") != std::string::npos;
        send_error(res, ApiError(413, "invalid_request_error",
                                 form ? "a body sent as application/x-www-form-urlencoded may be at most 8192 bytes; "
                                        "send JSON with Content-Type: application/json (curl: -H 'Content-Type: application/json')"
                                      : "the request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes"));
      } else {
        send_error(res, ApiError(status, status >= 500 ? "server_error" : "invalid_request_error",
                                 "HTTP " + std::to_string(status) + " for " + req.method + " " + req.path));
      }
      metrics_.count_request("other", status);  // never the raw path: one series per route, no label injection
    });
    server_.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown failure";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "server_error", "internal error: " + what));
      metrics_.count_request("other", 500);
    });
  }

  Json model_card() const {
    return {{"id", context_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "metainfer"},
            {"max_model_len", context_.max_context}};
  }

  void generate(Endpoint endpoint, const char* route, const httplib::Request& req, httplib::Response& res) {
    auto p = std::make_shared<Pending>();
    try {
      const ApiRequest api = parse_api_request(endpoint, req.body);
      PreparedRequest prepared = prepare_request(api, context_);
      p->channel = std::make_shared<RequestChannel>();
      p->who = new_identity(endpoint, context_.model_name);
      p->route = route;
      p->stream = api.stream;
      p->include_usage = api.include_usage;
      p->with_logprobs = api.logprobs >= 0;
      p->token_ids = api.return_token_ids;
      ++in_flight_;  // before submit: a drain that sees the loop idle must also see this response pending
      try {
        loop_.submit(std::move(prepared), p->channel);
      } catch (...) {
        --in_flight_;
        throw;
      }
    } catch (const ApiError& e) {
      if (e.status() == 429 || e.status() == 503) res.set_header("Retry-After", "1");
      send_error(res, e);
      metrics_.count_request(route, e.status());
      return;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        p->stream ? "text/event-stream" : "application/json",
        [this, p](std::size_t, httplib::DataSink& sink) { return produce(*p, sink); },
        [this, p](bool success) {
          if (!success || !p->done) p->channel->cancel();  // the client went away: free its sequence
          // The outcome, not only the header: a request that failed after its 200 header counts as 500.
          metrics_.count_request(p->route, !success || !p->done ? 499 : p->failed ? 500 : 200);
          --in_flight_;
        });
  }

  // One call of the content provider: waits briefly for events and writes what they make. false ends the response
  // (a write failed or the client is gone).
  bool produce(Pending& p, httplib::DataSink& sink) {
    using namespace std::chrono;
    const bool chat = p.who.endpoint == Endpoint::chat;
    const auto write = [&](const std::string& data) {
      p.last_write = steady_clock::now();
      return sink.write(data.data(), data.size());
    };
    const auto sse = [&](const Json& j) { return write("data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n"); };
    if (p.stream && chat && !p.role_sent) {
      p.role_sent = true;
      return sse(chat_role_chunk(p.who, p.include_usage));
    }
    std::vector<StreamEvent> events = p.channel->take(milliseconds(200));
    // Liveness: cpp-httplib 0.11's is_writable() is only a select() for writing, which a closed peer passes, so the
    // server writes something at least every second while it waits: an SSE comment in a stream, a space before a
    // JSON body (JSON allows leading whitespace). Once the client has gone the write fails (the first one draws the
    // peer's reset), the response ends and the request is cancelled.
    if (steady_clock::now() - p.last_write > seconds(1) && !write(p.stream ? ": keep-alive\n\n" : " ")) return false;
    if (events.empty()) return sink.is_writable();
    for (StreamEvent& ev : events) {
      if (!ev.error.empty()) {
        const ApiError e(500, "server_error", ev.error);
        if (p.stream) sse(e.to_json());
        else write(e.to_json().dump());
        p.done = true;
        p.failed = true;
        sink.done();
        return true;
      }
      if (p.stream) {
        if (!ev.text.empty() || !ev.logprobs.empty() || !ev.token_ids.empty() || ev.finished) {
          if (!sse(stream_chunk(p.who, ev.text, ev.logprobs, p.with_logprobs, ev.finish_reason, p.include_usage,
                                p.text_sent, p.token_ids ? &ev.token_ids : nullptr)))
            return false;
          p.text_sent += ev.text.size();
        }
        if (ev.finished) {
          if (p.include_usage && !sse(usage_chunk(p.who, ev.usage))) return false;
          if (!write("data: [DONE]\n\n")) return false;
        }
      } else {
        p.text += ev.text;
        for (TokenLogprob& lp : ev.logprobs) p.logprobs.push_back(std::move(lp));
        p.ids.insert(p.ids.end(), ev.token_ids.begin(), ev.token_ids.end());
        if (ev.finished &&
            !write(completion_response(p.who, p.text, ev.finish_reason, ev.usage, p.logprobs, p.with_logprobs,
                                       p.token_ids ? &p.ids : nullptr)
                       .dump(-1, ' ', false, Json::error_handler_t::replace)))
          return false;
      }
      if (ev.finished) {
        p.done = true;
        sink.done();
        return true;
      }
    }
    return true;
  }

  RequestSink& loop_;
  PreparationContext context_;
  ServerMetrics& metrics_;
  HttpOptions options_;
  httplib::Server server_;
  std::atomic<int> in_flight_{0};
  const long long created_ =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
};

HttpFrontEnd::HttpFrontEnd(RequestSink& loop, PreparationContext context, ServerMetrics& metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(loop, std::move(context), metrics, std::move(options))) {}

HttpFrontEnd::~HttpFrontEnd() = default;

int HttpFrontEnd::bind() { return impl_->bind(); }
bool HttpFrontEnd::listen() { return impl_->listen(); }
void HttpFrontEnd::stop() { impl_->stop(); }
int HttpFrontEnd::in_flight() const { return impl_->in_flight(); }

}  // namespace mi::server
