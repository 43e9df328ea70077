// An OpenAI-compatible server for serve-bench's tests, in process on 127.0.0.1 at an ephemeral port: GET /v1/models
// lists "fake-model"; POST /v1/completions and /v1/chat/completions stream a planned response: an empty-content
// chunk at once (a role chunk in chat), the first content chunk after `first_delay_ms`, the rest `gap_ms` apart, a
// usage chunk, then "data: [DONE]". Knobs plant the failures serve-bench must count.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace mi_test {

struct FakePlan {
  int first_delay_ms = 50;
  int gap_ms = 10;
  int tokens = 5;              // content chunks, one token each
  bool usage = true;           // send the final usage chunk
  bool split_events = false;   // write every event in several pieces, a few ms apart
  int status = 200;            // a non-200 status answers with an OpenAI error body
  int fail_every = 0;          // > 0: request k (1-based) with k % fail_every == 0 answers 500
  bool error_in_stream = false;  // an {"error": ...} chunk after the first content chunk
  // Serve GET /metrics with a metainfer engine's work counters (server_metrics.h) derived from the requests so far:
  // per request 7 prefill tokens in 0.1 s and tokens - 1 decode passes of one token each, 0.5 s in all.
  bool engine_metrics = false;
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakePlan plan) : plan_(plan) {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"},{"id":"other","object":"model"}]})",
                      "application/json");
    });
    if (plan_.engine_metrics)
      server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        const double n = requests_.load(), decode = n * (plan_.tokens - 1);
        res.set_content("# HELP metainfer_decode_tokens_total Tokens produced by the decode passes.\n"
                        "# TYPE metainfer_decode_tokens_total counter\n"
                        "metainfer_decode_tokens_total " + std::to_string(decode) + "\n"
                        "metainfer_decode_steps_total " + std::to_string(decode) + "\n"
                        "metainfer_decode_seconds_total " + std::to_string(0.5 * n) + "\n"
                        "metainfer_prefill_forward_tokens_total " + std::to_string(7 * n) + "\n"
                        "metainfer_prefill_forward_seconds_total " + std::to_string(0.1 * n) + "\n",
                        "text/plain; version=0.0.4");
      });
    auto complete = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    server_.Post("/v1/completions", complete);
    server_.Post("/v1/chat/completions", complete);
    server_.set_tcp_nodelay(true);  // each event leaves when written, as from a real server
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~FakeOpenAiServer() {
    stopping_ = true;
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  nlohmann::json last_body() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_body_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    const int k = ++requests_;
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_body_ = body;
    }
    const bool failing = plan_.status != 200 || (plan_.fail_every > 0 && k % plan_.fail_every == 0);
    if (failing) {
      res.status = plan_.status != 200 ? plan_.status : 500;
      res.set_content(R"({"error":{"message":"fake overload","type":"server_error","code":)" + std::to_string(res.status) + "}}",
                      "application/json");
      return;
    }
    const bool chat = req.path == "/v1/chat/completions";
    res.set_chunked_content_provider("text/event-stream", [this, chat](size_t, httplib::DataSink& sink) {
      auto chunk = [&](const std::string& content) {
        nlohmann::json c = {{"id", "cmpl-fake"}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"model", "fake-model"}};
        if (chat)
          c["choices"] = {{{"index", 0}, {"delta", content.empty() ? nlohmann::json{{"role", "assistant"}, {"content", ""}}
                                                                   : nlohmann::json{{"content", content}}}, {"finish_reason", nullptr}}};
        else
          c["choices"] = {{{"index", 0}, {"text", content}, {"finish_reason", nullptr}}};
        c["usage"] = nullptr;
        return c.dump();
      };
      auto send = [&](const std::string& data) {
        const std::string event = "data: " + data + "\n\n";
        if (!plan_.split_events) return sink.write(event.data(), event.size());
        // Several writes per event, a few ms apart, cutting the line, the JSON and the blank line.
        const std::size_t cuts[] = {0, 3, event.size() / 2, event.size() - 1, event.size()};
        for (int i = 0; i + 1 < 5; ++i) {
          if (cuts[i + 1] > cuts[i] && !sink.write(event.data() + cuts[i], cuts[i + 1] - cuts[i])) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return true;
      };
      auto pause = [&](int ms) {  // sleeps in slices so that a stopping server is not held up
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (std::chrono::steady_clock::now() < until && !stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return !stopping_.load();
      };
      if (!send(chunk(""))) return false;  // no content: must not count as the first token
      if (!pause(plan_.first_delay_ms)) return false;
      for (int i = 0; i < plan_.tokens; ++i) {
        if (i > 0 && !pause(plan_.gap_ms)) return false;
        if (!send(chunk(" tok" + std::to_string(i)))) return false;
        if (i == 0 && plan_.error_in_stream) {
          send(R"({"error":{"message":"fake engine crash","type":"internal_error","code":500}})");
          sink.done();
          return true;
        }
      }
      if (plan_.usage) {
        const nlohmann::json u = {{"id", "cmpl-fake"},
                                  {"choices", nlohmann::json::array()},
                                  {"usage", {{"prompt_tokens", 7}, {"completion_tokens", plan_.tokens}, {"total_tokens", 7 + plan_.tokens}}}};
        if (!send(u.dump())) return false;
      }
      send("[DONE]");
      sink.done();
      return true;
    });
  }

  FakePlan plan_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  std::atomic<int> requests_{0};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  nlohmann::json last_body_;
};

}  // namespace mi_test
