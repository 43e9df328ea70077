// `metainfer serve-bench --url http://127.0.0.1:PORT [--model M] [--concurrency 1,4,16] [--requests N] [--prompt-tokens N |
// --prompt TEXT | --prompt-ids-len N] [--max-tokens N] [--endpoint completions|chat] [--timeout-s S] [--deadline-s S]
// [--json F] [--markdown F]`: a bounded load generator for an OpenAI-compatible server on this machine (README
// "serve-bench"). Streams every request and times it client-side (TTFT, TPOT, ITL, E2E). Markdown on stdout, progress
// on stderr. Exit 0 every request completed; 1 a request failed, the deadline left requests unsent, or the server
// could not be reached; 2 bad input (a non-loopback URL among it).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"
#include "servebench/load_run.h"
#include "servebench/loopback_url.h"
#include "servebench/model_list.h"
#include "servebench/prompt.h"
#include "servebench/serving_report.h"

namespace mi::cli {
namespace fs = std::filesystem;

namespace {

void check_output_file(const std::string& flag, const std::string& file) {
  if (file.empty()) return;
  const fs::path parent = fs::absolute(fs::path(file)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) fail(flag, ": the directory '", parent.string(), "' does not exist");
  if (fs::is_directory(fs::path(file), ec)) fail(flag, ": '", file, "' is a directory");
}

void write_file(const std::string& flag, const std::string& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail(flag, ": cannot write '", file, "'");
}

}  // namespace

void register_serve_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve-bench", "Load an OpenAI-compatible server on this machine: streamed TTFT, TPOT, ITL, E2E and throughput per concurrency level");
  struct Options {
    std::string url, model, prompt, endpoint = "completions", json_file, markdown_file;
    std::vector<int> concurrency = {1};
    int requests = 0, prompt_tokens = 0, prompt_ids_len = 0, max_tokens = 128;
    double timeout_s = 120, deadline_s = 1800;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--url", opts->url, "the server: http://127.0.0.1:PORT, http://[::1]:PORT or http://localhost:PORT (nothing else)")->required();
  cmd->add_option("--model", opts->model, "model name sent in each request (default: the first id of GET /v1/models)");
  cmd->add_option("--concurrency", opts->concurrency, "concurrency levels, run in order, e.g. 1,4,16")->delimiter(',')->capture_default_str();
  auto* nreq = cmd->add_option("--requests", opts->requests, "requests per level (default: 2 x concurrency, at least 4)");
  auto* pt = cmd->add_option("--prompt-tokens", opts->prompt_tokens, "a deterministic text prompt of about N tokens (default 32)");
  auto* ptext = cmd->add_option("--prompt", opts->prompt, "the prompt text");
  auto* pids = cmd->add_option("--prompt-ids-len", opts->prompt_ids_len,
                               "send N deterministic token ids as \"prompt\": [ids...] to /v1/completions (servers without a tokenizer)");
  pt->excludes(ptext)->excludes(pids);
  ptext->excludes(pids);
  cmd->add_option("--max-tokens", opts->max_tokens, "max_tokens of each request (temperature 0)")->capture_default_str();
  cmd->add_option("--endpoint", opts->endpoint, "completions (/v1/completions) or chat (/v1/chat/completions)")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  cmd->add_option("--timeout-s", opts->timeout_s, "seconds allowed per request")->capture_default_str();
  cmd->add_option("--deadline-s", opts->deadline_s, "seconds allowed for the whole run; no request starts after it")->capture_default_str();
  cmd->add_option("--json", opts->json_file, "write the report as JSON to this file");
  cmd->add_option("--markdown", opts->markdown_file, "also write the Markdown report (always printed on stdout) to this file");
  cmd->callback([opts, nreq, pt, ptext, pids, &exit_code] {
    using namespace mi::servebench;
    Workload w;
    w.url = parse_loopback_url(opts->url);
    if (opts->concurrency.empty()) fail("--concurrency: give at least one level");
    for (int c : opts->concurrency)
      if (c < 1 || c > 1024) fail("--concurrency: every level must be in 1..1024, got ", c);
    if (nreq->count() > 0 && opts->requests < 1) fail("--requests: expected an integer >= 1, got ", opts->requests);
    if (opts->max_tokens < 1) fail("--max-tokens: expected an integer >= 1, got ", opts->max_tokens);
    if (!(opts->timeout_s > 0 && opts->timeout_s <= 1e6)) fail("--timeout-s: expected seconds in (0, 1e6], got ", opts->timeout_s);
    if (!(opts->deadline_s > 0 && opts->deadline_s <= 1e6)) fail("--deadline-s: expected seconds in (0, 1e6], got ", opts->deadline_s);
    if (pt->count() > 0 && opts->prompt_tokens < 1) fail("--prompt-tokens: expected an integer >= 1, got ", opts->prompt_tokens);
    if (pids->count() > 0 && opts->prompt_ids_len < 1) fail("--prompt-ids-len: expected an integer >= 1, got ", opts->prompt_ids_len);
    if (pids->count() > 0) {
      if (opts->endpoint != "completions") fail("--prompt-ids-len: token ids need --endpoint completions");
      w.prompt_ids = id_prompt(opts->prompt_ids_len);
    } else if (ptext->count() > 0) {
      if (opts->prompt.empty()) fail("--prompt: the prompt text is empty");
      w.prompt_text = opts->prompt;
    } else {
      w.prompt_words = opts->prompt_tokens > 0 ? opts->prompt_tokens : 32;
      w.prompt_text = text_prompt(w.prompt_words);
    }
    w.endpoint = opts->endpoint == "chat" ? Endpoint::chat : Endpoint::completions;
    w.max_tokens = opts->max_tokens;
    w.timeout_s = opts->timeout_s;
    check_output_file("--json", opts->json_file);
    check_output_file("--markdown", opts->markdown_file);

    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts->deadline_s));
    w.model = opts->model;
    if (w.model.empty()) {
      exit_code = kExitFailure;  // an unreachable server is a failed run, not bad flags
      const std::vector<std::string> models = list_models(w.url, std::min(opts->timeout_s, opts->deadline_s));
      if (models.empty()) fail("GET ", w.url.text, "/v1/models: the server lists no model; name one with --model");
      w.model = models.front();
      exit_code = kExitOk;
    }
    std::cerr << "serve-bench: " << w.url.text << endpoint_path(w.endpoint) << ", model " << w.model << "\n";

    std::vector<LevelRun> runs;
    for (int c : opts->concurrency) {
      const int n = opts->requests > 0 ? opts->requests : std::max(4, 2 * c);
      runs.push_back(run_level(w, c, n, deadline, &std::cerr));
    }
    const nlohmann::json report = make_report(w, opts->deadline_s, runs);
    const std::string markdown = to_markdown(report);
    if (!opts->json_file.empty()) write_file("--json", opts->json_file, report.dump(2) + "\n");
    if (!opts->markdown_file.empty()) write_file("--markdown", opts->markdown_file, markdown);
    std::cout << markdown;
    bool all_sent = true;
    for (const nlohmann::json& l : report["levels"]) all_sent = all_sent && l["not_sent"].get<int>() == 0;
    exit_code = report["failed_requests"].get<int>() == 0 && all_sent ? kExitOk : kExitFailure;
  });
}

}  // namespace mi::cli
