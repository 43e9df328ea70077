// `ENGINE serve`: the engine behind an OpenAI-compatible HTTP API (engines generated with runtime.mode = "serve").
//
//   ENGINE serve --model DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME] [--threads N]
//                [--mode precise|fast] [--max-waiting 64] [--http-threads N] [--max-body-bytes N]
//
// Prints one JSON line {"event": "listening", "host", "port", "model", ...} on standard output once the socket is
// bound (with --port 0 the port the system chose), then serves until SIGTERM or SIGINT: new requests get 503,
// requests in flight run to completion and their responses are sent, then the process exits 0.
// Batch size, context, KV block size, chunked prefill and the prefix cache are the engine's compiled constraints
// (the prefix cache as the type ServeCommand is instantiated with: runtime::PrefixCache or NoPrefixCache).
//
// The command line of `serve` (CLI11), the checks of its settings, the checkpoint's tokenizer and chat template and
// the "listening" line are non-template code in serve_command.cpp, compiled once into engine_core.
#pragma once
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "engine/cli.h"
#include "server/http_server.h"
#include "server/serving_loop.h"
#include "tokenizer/tokenizer.h"

namespace mi::server {

struct ServeSettings {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;  // default: the checkpoint directory's name
  int threads = 0;                // 0: the engine's compiled default
  std::string mode;               // "": the engine's compiled default
  int max_waiting = 64;
  int http_threads = 0;  // 0: max_batch + max_waiting + kSpareHttpThreads
  long long max_body_bytes = 8ll << 20;
};

// HTTP threads beyond the ones requests can hold (max_batch running + max_waiting queued): /health, /metrics and the
// 429 answers of an overloaded server always find a free thread.
inline constexpr int kSpareHttpThreads = 8;

// The settings checked against the engine (UsageError naming the flag otherwise), with the defaults resolved.
struct ServePlan {
  int threads = 1;
  std::string mode;
  int http_threads = 0;
  std::string model_name;  // what clients send as "model"
};
ServePlan plan_serve(const engine::EngineInfo& info, const ServeSettings& s);

// The checkpoint's text support: tokenizer.json for text in and out, a chat template for /v1/chat/completions.
// Without them the server still serves token-id prompts on /v1/completions, and says why (chat_unavailable).
struct ServeText {
  std::optional<tok::Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  std::string no_chat_reason;
};
ServeText load_serve_text(const std::string& model_dir);

// The facts of the bound server printed as its one "listening" JSON line.
struct ListeningFacts {
  int port = 0;
  std::size_t kv_blocks = 0;
  bool prefix_cache = false;
};
void print_listening(const engine::EngineInfo& info, const ServeSettings& s, const ServePlan& plan, const ServeText& text,
                     const ListeningFacts& facts, std::ostream& out);

// The registration of `serve` and its options on the command line, writing them into `*s` (ExtraCommand::add).
std::function<CLI::App*(CLI::App&)> serve_command_line(std::shared_ptr<ServeSettings> s);

template <ServableModel M, PrefixReuse Prefix>
int run_serve(const engine::EngineInfo& info, const ServeSettings& s, std::ostream& out, std::ostream& err) {
  const ServePlan plan = plan_serve(info, s);
  ServeText text = load_serve_text(s.model_dir);
  std::optional<tok::Tokenizer>& tokenizer = text.tokenizer;
  std::optional<chat::ChatTemplate>& chat_template = text.chat_template;

  // SIGTERM/SIGINT are taken by one thread (sigtimedwait) instead of a handler. They are blocked before the model
  // starts its worker threads: every thread inherits the mask, and a process-directed signal is delivered only to a
  // thread that does not block it, so none may be left unblocked (one would take the default action: death).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::RuntimeOptions ro;
  ro.threads = plan.threads;
  ro.max_batch = info.max_batch;
  ro.max_context = info.max_context;
  ro.kv_block_size = info.kv_block_size;
  ro.kv_blocks = info.kv_blocks;
  ro.fast = plan.mode == "fast";
  M model = engine::load_model<M>(s.model_dir, ro);

  ServerMetrics metrics;
  LoopOptions lo;
  lo.limits.max_batch = info.max_batch;
  lo.limits.max_context = info.max_context;
  lo.limits.kv_block_size = info.kv_block_size;
  // The scheduler admits against the pool the model really allocated (one number, read from the cache itself).
  lo.limits.kv_blocks = int(model.kv_cache().total_blocks());
  lo.limits.chunked_prefill = info.chunked_prefill;
  lo.max_waiting = s.max_waiting;
  ServingLoop<M, Prefix> loop(model, tokenizer ? &*tokenizer : nullptr, lo, metrics);

  PreparationContext context;
  context.model_name = plan.model_name;
  context.tokenizer = tokenizer ? &*tokenizer : nullptr;
  context.chat_template = chat_template ? &*chat_template : nullptr;
  context.vocab_size = model.vocab_size();
  context.max_context = info.max_context;
  HttpOptions ho;
  ho.host = s.host;
  ho.port = s.port;
  ho.http_threads = plan.http_threads;
  ho.max_body_bytes = std::size_t(s.max_body_bytes);
  HttpServer<ServingLoop<M, Prefix>> http(loop, context, metrics, ho);
  const int port = http.bind();

  std::atomic<bool> loop_done{false}, shutting_down{false};
  std::thread loop_thread([&] {
    loop.run();
    loop_done = true;
  });
  std::thread signal_thread([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    while (!shutting_down) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig != SIGTERM && sig != SIGINT) continue;
      err << info.engine_name << ": " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
          << ": draining (no new requests; finishing those in flight)\n" << std::flush;
      loop.drain();
      while (!loop_done || http.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      http.stop();
      return;
    }
  });

  print_listening(info, s, plan, text, {port, std::size_t(model.kv_cache().total_blocks()), Prefix::kReusesPrefixes}, out);
  const bool served = http.listen();

  shutting_down = true;
  loop.drain();
  loop_thread.join();
  signal_thread.join();
  if (!served) {
    err << info.engine_name << ": error: the HTTP server stopped unexpectedly\n";
    return 1;
  }
  err << info.engine_name << ": stopped\n";
  return 0;
}

// Registers `serve` on an engine's command line (engine_features.h names this type for serve engines, with the
// prefix reuse its constraints ask for: runtime::PrefixCache or NoPrefixCache).
template <PrefixReuse Prefix>
struct ServeCommand {
  template <class M>
  static std::vector<engine::ExtraCommand> add(const engine::EngineInfo& info, std::ostream& out, std::ostream& err) {
    static_assert(ServableModel<M>, "serve needs a model with kv_cache() (engine::Model generated by metainfer)");
    auto s = std::make_shared<ServeSettings>();
    return {{serve_command_line(s), [s, &info, &out, &err] { return run_serve<M, Prefix>(info, *s, out, err); }}};
  }
};

}  // namespace mi::server
