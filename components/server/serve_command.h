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
#pragma once
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

template <ServableModel M, PrefixReuse Prefix>
int run_serve(const engine::EngineInfo& info, const ServeSettings& s, std::ostream& out, std::ostream& err) {
  using engine::usage_fail;
  const int threads = s.threads > 0 ? s.threads : info.threads;
  const std::string mode = s.mode.empty() ? (info.fast_numerics_default ? "fast" : "precise") : s.mode;
  if (s.threads < 0) usage_fail("--threads: expected an integer >= 1, got ", s.threads);
  if (s.port < 0 || s.port > 65535) usage_fail("--port: expected 0..65535 (0: any free port), got ", s.port);
  if (s.max_waiting < 1) usage_fail("--max-waiting: expected an integer >= 1, got ", s.max_waiting);
  // Every request in flight holds an HTTP thread until its response ends; with fewer threads than can be in flight,
  // connections would queue inside the HTTP library, unseen by 429 and /metrics, and /health would stall.
  const int needed_threads = info.max_batch + s.max_waiting + kSpareHttpThreads;
  const int http_threads = s.http_threads > 0 ? s.http_threads : needed_threads;
  if (http_threads < needed_threads)
    usage_fail("--http-threads: ", s.http_threads, " is fewer than max_batch (", info.max_batch, ") + --max-waiting (",
               s.max_waiting, ") + ", kSpareHttpThreads, " spare = ", needed_threads,
               ": requests would queue unseen and /health stall; give at least that many, or fewer --max-waiting");
  if (s.max_body_bytes < 1024) usage_fail("--max-body-bytes: expected at least 1024, got ", s.max_body_bytes);
  std::error_code ec;
  if (!std::filesystem::is_directory(s.model_dir, ec)) usage_fail("--model: '", s.model_dir, "' is not a directory");
  std::string name = s.served_model_name;
  if (name.empty()) {
    std::filesystem::path dir = std::filesystem::path(s.model_dir);
    if (dir.filename().empty()) dir = dir.parent_path();
    name = dir.filename().string();
  }

  // Text in and out needs tokenizer.json; chat needs a chat template in tokenizer_config.json. Without them the
  // server still serves token-id prompts on /v1/completions, and says so.
  std::optional<tok::Tokenizer> tokenizer;
  if (engine::cli_detail::has_tokenizer(s.model_dir)) tokenizer.emplace(engine::cli_detail::load_tokenizer(s.model_dir));
  std::optional<chat::ChatTemplate> chat_template;
  std::string no_chat_reason;
  if (tokenizer) {
    try {
      chat_template.emplace(chat::ChatTemplate::load(s.model_dir));
    } catch (const std::exception& e) {
      no_chat_reason = e.what();
    }
  } else {
    no_chat_reason = "no tokenizer.json";
  }

  // SIGTERM/SIGINT are taken by one thread (sigtimedwait) instead of a handler. They are blocked before the model
  // starts its worker threads: every thread inherits the mask, and a process-directed signal is delivered only to a
  // thread that does not block it, so none may be left unblocked (one would take the default action: death).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::RuntimeOptions ro;
  ro.threads = threads;
  ro.max_batch = info.max_batch;
  ro.max_context = info.max_context;
  ro.kv_block_size = info.kv_block_size;
  ro.kv_blocks = info.kv_blocks;
  ro.fast = mode == "fast";
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
  context.model_name = name;
  context.tokenizer = tokenizer ? &*tokenizer : nullptr;
  context.chat_template = chat_template ? &*chat_template : nullptr;
  context.vocab_size = model.vocab_size();
  context.max_context = info.max_context;
  HttpOptions ho;
  ho.host = s.host;
  ho.port = s.port;
  ho.http_threads = http_threads;
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

  nlohmann::ordered_json ready = {{"event", "listening"},
                                  {"host", s.host},
                                  {"port", port},
                                  {"model", name},
                                  {"engine", info.engine_name},
                                  {"kernel_level", info.kernel_level},
                                  {"max_batch", info.max_batch},
                                  {"max_context", info.max_context},
                                  {"kv_block_size", info.kv_block_size},
                                  {"kv_blocks", model.kv_cache().total_blocks()},
                                  {"prefix_cache", Prefix::kReusesPrefixes},
                                  {"chat", chat_template.has_value()}};
  if (!chat_template) ready["chat_unavailable"] = no_chat_reason;
  out << ready.dump() << "\n" << std::flush;
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
  static std::vector<engine::ExtraCommand> add(CLI::App& app, const engine::EngineInfo& info, std::ostream& out,
                                               std::ostream& err) {
    static_assert(ServableModel<M>, "serve needs a model with kv_cache() (engine::Model generated by metainfer)");
    auto s = std::make_shared<ServeSettings>();
    CLI::App* cmd = app.add_subcommand("serve", "serve the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, ...)");
    cmd->add_option("--model", s->model_dir, "checkpoint directory (config.json, *.safetensors, tokenizer files)")->required();
    cmd->add_option("--host", s->host, "address to listen on (default 127.0.0.1)");
    cmd->add_option("--port", s->port, "TCP port (default 8000; 0: any free port, printed at start)");
    cmd->add_option("--served-model-name", s->served_model_name, "the model id clients send (default: the checkpoint directory's name)");
    cmd->add_option("--threads", s->threads, "worker threads (default: the engine's)");
    cmd->add_option("--mode", s->mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
    cmd->add_option("--max-waiting", s->max_waiting, "queued requests beyond which new ones get 429 (default 64)");
    cmd->add_option("--http-threads", s->http_threads, "connections served at once (default max_batch + max-waiting + 8)");
    cmd->add_option("--max-body-bytes", s->max_body_bytes, "largest request body; larger ones get 413 (default 8 MiB)");
    return {{cmd, [s, &info, &out, &err] { return run_serve<M, Prefix>(info, *s, out, err); }}};
  }
};

}  // namespace mi::server
