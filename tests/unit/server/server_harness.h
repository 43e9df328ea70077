// The real HTTP server and serving loop on a loopback port, driving FakeModel (fake_model.h) with the real Qwen3
// tokenizer and chat template, for the server tests. Harness serves without the prefix cache (NoPrefixCache, as engines
// generated with runtime.prefix_cache off), PrefixCacheHarness with it (runtime::PrefixCache).
#pragma once
#include <httplib.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "fake_model.h"
#include "runtime/prefix_cache.h"
#include "server/http_server.h"
#include "server/no_prefix_cache.h"
#include "server/serving_loop.h"
#include "tokenizer/tokenizer.h"

namespace mi::server::test {

inline std::string tokenizer_dir() { return std::string(METAINFER_TOKENIZERS) + "/qwen3"; }

struct HarnessOptions {
  int max_batch = 8;
  int max_context = 256;
  int block = 4;
  int chunked_prefill = 0;
  int max_waiting = 64;
  int kv_blocks = 0;  // the KV pool in blocks (the model's cache and the scheduler's budget); 0 = max_batch x max_context
  std::size_t max_body_bytes = 1u << 20;
};

template <PrefixReuse Prefix, class Model = FakeModel>
class BasicHarness {
 public:
  using Loop = ServingLoop<Model, Prefix>;

  explicit BasicHarness(const HarnessOptions& o = {})
      : tokenizer_(tok::Tokenizer::load(tokenizer_dir())),
        template_(chat::ChatTemplate::load(tokenizer_dir())),
        model_(int(tokenizer_.vocab_size()), o.max_batch, o.max_context, o.block, o.kv_blocks),
        loop_(model_, &tokenizer_, loop_options(o), metrics_),
        http_(loop_, context(o), metrics_, http_options(o)) {
    port_ = http_.bind();
    loop_thread_ = std::thread([this] { loop_.run(); });
    http_thread_ = std::thread([this] { http_.listen(); });
  }
  ~BasicHarness() {
    loop_.drain();
    while (http_.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_.stop();
    loop_thread_.join();
    http_thread_.join();
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  int port() const { return port_; }
  Model& model() { return model_; }
  Loop& loop() { return loop_; }
  const tok::Tokenizer& tokenizer() const { return tokenizer_; }
  std::string text_of(const std::vector<int32_t>& ids) const { return tokenizer_.decode(ids, true); }

 private:
  static LoopOptions loop_options(const HarnessOptions& o) {
    LoopOptions lo;
    lo.limits.max_batch = o.max_batch;
    lo.limits.max_context = o.max_context;
    lo.limits.kv_block_size = o.block;
    lo.limits.chunked_prefill = o.chunked_prefill;
    lo.limits.kv_blocks = o.kv_blocks;
    lo.max_waiting = o.max_waiting;
    return lo;
  }
  PreparationContext context(const HarnessOptions& o) const {
    PreparationContext c;
    c.model_name = "fake";
    c.tokenizer = &tokenizer_;
    c.chat_template = &template_;
    c.vocab_size = int(tokenizer_.vocab_size());
    c.max_context = o.max_context;
    return c;
  }
  static HttpOptions http_options(const HarnessOptions& o) {
    HttpOptions h;
    h.port = 0;
    h.http_threads = 32;
    h.max_body_bytes = o.max_body_bytes;
    return h;
  }

  tok::Tokenizer tokenizer_;
  chat::ChatTemplate template_;
  Model model_;
  ServerMetrics metrics_;
  Loop loop_;
  HttpServer<Loop> http_;
  int port_ = 0;
  std::thread loop_thread_, http_thread_;
};

using Harness = BasicHarness<NoPrefixCache>;
using PrefixCacheHarness = BasicHarness<runtime::PrefixCache>;

// A streamed response split into its SSE data payloads ("[DONE]" kept as text).
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

}  // namespace mi::server::test
