// The OpenAI-compatible HTTP front end (cpp-httplib, Debian's libcpp-httplib): routes, request checking, SSE
// streaming and error objects. Generation itself happens on the serving loop's thread; an HTTP thread only parses,
// tokenizes, queues the request and relays its events.
//
//   POST /v1/completions, POST /v1/chat/completions   (server/openai_request.h lists the fields)
//   GET  /v1/models, GET /v1/models/{id}, GET /health (200, or 503 while draining), GET /metrics (Prometheus text)
//
// Status codes: 400 malformed JSON or a bad field (the error's `param` names it), 404 unknown route or model, 413
// body larger than max_body_bytes, 429 too many requests waiting, 503 draining; 500 only for the server's own
// failures. Streams are Server-Sent Events: "data: <chunk JSON>\n\n" ... "data: [DONE]\n\n"; a failure after the
// stream started is sent as "data: {"error": {...}}\n\n" and the stream ends. Non-streamed responses are sent with
// chunked transfer encoding, with a space written every second until the JSON is ready (leading whitespace is valid
// JSON), so that a client that goes away is noticed (a write fails) and its sequence freed at the next step
// boundary, as for streams. The status of such a response is committed at 200: a failure of the server after that
// point (never of the request's input, which is checked before) is sent as an error object in the body.
//
// The front end (routes, parsing, SSE, cpp-httplib itself) is non-template code in http_server.cpp, compiled once
// into engine_core; it reaches the serving loop through RequestSink, so the model's translation unit holds only the
// thin HttpServer<Loop> adapter and never parses httplib.h.
#pragma once
#include <memory>
#include <string>

#include "server/request_channel.h"
#include "server/request_preparation.h"
#include "server/server_metrics.h"

namespace mi::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                          // 0: any free port (reported by bind())
  int http_threads = 64;                    // connections served at once (a stream holds one for its duration)
  std::size_t max_body_bytes = 8u << 20;    // larger request bodies: 413
};

// What the HTTP front end needs of the serving loop (ServingLoop's submit, gauges, draining).
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Queues a prepared request; its events arrive on `channel`. ApiError (429, 503) when it is refused.
  virtual void submit(PreparedRequest request, std::shared_ptr<RequestChannel> channel) = 0;
  virtual LoopGauges gauges() const = 0;
  virtual bool draining() const = 0;
};

// The HTTP front end over a RequestSink (http_server.cpp).
class HttpFrontEnd {
 public:
  HttpFrontEnd(RequestSink& loop, PreparationContext context, ServerMetrics& metrics, HttpOptions options);
  ~HttpFrontEnd();
  HttpFrontEnd(const HttpFrontEnd&) = delete;
  HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

  // Binds the listening socket; returns the port (mi::Error when the address cannot be bound).
  int bind();
  // Serves until stop(); false when the listening loop failed.
  bool listen();
  void stop();
  // Responses still being produced (a drain waits for 0 before stop()).
  int in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// RequestSink over a loop with ServingLoop's submit, gauges and draining.
template <class Loop>
class LoopRequestSink final : public RequestSink {
 public:
  explicit LoopRequestSink(Loop& loop) : loop_(loop) {}
  void submit(PreparedRequest request, std::shared_ptr<RequestChannel> channel) override {
    loop_.submit(std::move(request), std::move(channel));
  }
  LoopGauges gauges() const override { return loop_.gauges(); }
  bool draining() const override { return loop_.draining(); }

 private:
  Loop& loop_;
};

// Loop: the ServingLoop it hands requests to (submit, gauges, draining).
template <class Loop>
class HttpServer {
 public:
  HttpServer(Loop& loop, PreparationContext context, ServerMetrics& metrics, HttpOptions options)
      : sink_(loop), front_(sink_, std::move(context), metrics, std::move(options)) {}

  int bind() { return front_.bind(); }
  bool listen() { return front_.listen(); }
  void stop() { front_.stop(); }
  int in_flight() const { return front_.in_flight(); }

 private:
  LoopRequestSink<Loop> sink_;
  HttpFrontEnd front_;
};

}  // namespace mi::server
