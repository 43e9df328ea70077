// Test support: an LLM endpoint on loopback that replays a planned script over real HTTP. It speaks both wire
// formats, chosen by the request path (".../chat/completions": OpenAI; "/v1/messages": Anthropic), and answers with
// SSE when the request asks to stream. Each request consumes the next step of the script: the step's `expect`
// is checked against the request (mismatches are collected in failures(), never thrown across the HTTP thread),
// and its `respond` is rendered in the request's format.
//
// Script (JSON):
//   {"steps": [ {"expect": {"api": "openai"|"anthropic", "tools": [names, exact set], "last": "user"|"tool",
//                           "stream": bool, "body_contains": [substrings], "system_contains": substring},
//                "respond": {"status": 200, "headers": {...}, "error": "message for a non-200",
//                            "text": "...", "tool_calls": [{"id", "name", "arguments": {...}}],
//                            "usage": {"input": N, "output": M}, "delay_s": seconds before the body,
//                            "raw": a JSON body sent as it is, not streamed (a malformed endpoint)}} ]}
// Every key is optional. A request after the last step gets a 500 and a failure.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace mi_test {

struct ReceivedRequest {
  std::string path, api;
  std::map<std::string, std::string> headers;  // lower-case names
  nlohmann::json body;
};

class ScriptedLlmServer {
 public:
  explicit ScriptedLlmServer(nlohmann::json script);
  // Over TLS (https) with this PEM certificate and key.
  ScriptedLlmServer(nlohmann::json script, const std::string& cert_pem_file, const std::string& key_pem_file);
  ~ScriptedLlmServer();

  int port() const { return port_; }
  std::string base_url() const { return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_); }

  std::vector<ReceivedRequest> requests() const;
  std::vector<std::string> failures() const;
  std::size_t steps_left() const;

 private:
  void handle(const std::string& api, const void* req, void* res);
  void start();

  nlohmann::json steps_;
  std::size_t next_ = 0;
  mutable std::mutex mu_;
  std::vector<ReceivedRequest> requests_;
  std::vector<std::string> failures_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace mi_test
