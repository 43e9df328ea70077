// `ENGINE serve`'s model-independent half (server/serve_command.h): its command line (CLI11), the checks of its
// settings, the checkpoint's tokenizer and chat template, and the "listening" line. Compiled once into engine_core of
// serve engines, so the model's translation unit holds only the serving itself.
#include "server/serve_command.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace mi::server {

ServePlan plan_serve(const engine::EngineInfo& info, const ServeSettings& s) {
  using engine::usage_fail;
  ServePlan plan;
  plan.threads = s.threads > 0 ? s.threads : info.threads;
  plan.mode = s.mode.empty() ? (info.fast_numerics_default ? "fast" : "precise") : s.mode;
  if (s.threads < 0) usage_fail("--threads: expected an integer >= 1, got ", s.threads);
  if (s.port < 0 || s.port > 65535) usage_fail("--port: expected 0..65535 (0: any free port), got ", s.port);
  if (s.max_waiting < 1) usage_fail("--max-waiting: expected an integer >= 1, got ", s.max_waiting);
  // Every request in flight holds an HTTP thread until its response ends; with fewer threads than can be in flight,
  // connections would queue inside the HTTP library, unseen by 429 and /metrics, and /health would stall.
  const int needed_threads = info.max_batch + s.max_waiting + kSpareHttpThreads;
  plan.http_threads = s.http_threads > 0 ? s.http_threads : needed_threads;
  if (plan.http_threads < needed_threads)
    usage_fail("--http-threads: ", s.http_threads, " is fewer than max_batch (", info.max_batch, ") + --max-waiting (",
               s.max_waiting, ") + ", kSpareHttpThreads, " spare = ", needed_threads,
               ": requests would queue unseen and /health stall; give at least that many, or fewer --max-waiting");
  if (s.max_body_bytes < 1024) usage_fail("--max-body-bytes: expected at least 1024, got ", s.max_body_bytes);
  std::error_code ec;
  if (!std::filesystem::is_directory(s.model_dir, ec)) usage_fail("--model: '", s.model_dir, "' is not a directory");
  plan.model_name = s.served_model_name;
  if (plan.model_name.empty()) {
    std::filesystem::path dir = std::filesystem::path(s.model_dir);
    if (dir.filename().empty()) dir = dir.parent_path();
    plan.model_name = dir.filename().string();
  }
  return plan;
}

ServeText load_serve_text(const std::string& model_dir) {
  ServeText text;
  if (engine::cli_detail::has_tokenizer(model_dir)) text.tokenizer.emplace(engine::cli_detail::load_tokenizer(model_dir));
  if (text.tokenizer) {
    try {
      text.chat_template.emplace(chat::ChatTemplate::load(model_dir));
    } catch (const std::exception& e) {
      text.no_chat_reason = e.what();
    }
  } else {
    text.no_chat_reason = "no tokenizer.json";
  }
  return text;
}

void print_listening(const engine::EngineInfo& info, const ServeSettings& s, const ServePlan& plan, const ServeText& text,
                     const ListeningFacts& facts, std::ostream& out) {
  nlohmann::ordered_json ready = {{"event", "listening"},
                                  {"host", s.host},
                                  {"port", facts.port},
                                  {"model", plan.model_name},
                                  {"engine", info.engine_name},
                                  {"kernel_level", info.kernel_level},
                                  {"max_batch", info.max_batch},
                                  {"max_context", info.max_context},
                                  {"kv_block_size", info.kv_block_size},
                                  {"kv_blocks", facts.kv_blocks},
                                  {"prefix_cache", facts.prefix_cache},
                                  {"chat", text.chat_template.has_value()}};
  if (!text.chat_template) ready["chat_unavailable"] = text.no_chat_reason;
  out << ready.dump() << "\n" << std::flush;
}

namespace {

CLI::App* add_serve_command(CLI::App& app, ServeSettings& s) {
  CLI::App* cmd = app.add_subcommand("serve", "serve the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, ...)");
  cmd->add_option("--model", s.model_dir, "checkpoint directory (config.json, *.safetensors, tokenizer files)")->required();
  cmd->add_option("--host", s.host, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", s.port, "TCP port (default 8000; 0: any free port, printed at start)");
  cmd->add_option("--served-model-name", s.served_model_name, "the model id clients send (default: the checkpoint directory's name)");
  cmd->add_option("--threads", s.threads, "worker threads (default: the engine's)");
  cmd->add_option("--mode", s.mode, "numerics: precise or fast")->check(CLI::IsMember({"precise", "fast"}));
  cmd->add_option("--max-waiting", s.max_waiting, "queued requests beyond which new ones get 429 (default 64)");
  cmd->add_option("--http-threads", s.http_threads, "connections served at once (default max_batch + max-waiting + 8)");
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "largest request body; larger ones get 413 (default 8 MiB)");
  return cmd;
}

}  // namespace

std::function<CLI::App*(CLI::App&)> serve_command_line(std::shared_ptr<ServeSettings> s) {
  return [s](CLI::App& app) { return add_serve_command(app, *s); };
}

}  // namespace mi::server
