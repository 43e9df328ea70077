#include "bench/engine_runner.h"

#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/workload.h"
#include "common/error.h"
#include "gates/sandbox.h"
#include "generator/manifest.h"
#include "process/streaming.h"
#include "prompts/token_prompts.h"

namespace mi::bench {
namespace fs = std::filesystem;

void IdStreamClock::feed(double t_s, std::string_view chunk) {
  for (char ch : chunk) {
    if (done_) return;
    if (ch == '@' && arrivals_.empty() && prompt_start_ < 0) {
      prompt_start_ = t_s;
    } else if (ch >= '0' && ch <= '9') {
      if (!in_id_) arrivals_.push_back(t_s);
      in_id_ = true;
    } else {
      in_id_ = false;
      if (ch == '\n') done_ = true;  // the engine ends the id list with one newline
    }
  }
}

EngineRunner::EngineRunner(fs::path binary, const fs::path& checkpoint, int threads, int vocab, double timeout_s)
    : binary_(std::move(binary)), threads_(threads), vocab_(vocab), timeout_s_(timeout_s) {
  std::error_code ec;
  if (!fs::is_regular_file(binary_, ec)) fail("engine binary ", binary_.string(), " does not exist");
  if (!fs::is_regular_file(checkpoint / "config.json", ec)) fail(checkpoint.string(), ": no config.json");
  view_ = fs::temp_directory_path() / ("metainfer-bench-" + std::to_string(::getpid()) + "-" + gates::random_name());
  fs::create_directories(view_);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(generator::read_file(checkpoint / "config.json"));
  config.erase("eos_token_id");
  if (config.contains("text_config") && config["text_config"].is_object()) config["text_config"].erase("eos_token_id");
  generator::write_file(view_ / "config.json", config.dump(2) + "\n");
  for (const auto& e : fs::directory_iterator(checkpoint)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".safetensors") || name == "model.safetensors.index.json")
      fs::create_symlink(fs::absolute(e.path()), view_ / name);
  }
}

EngineRunner::~EngineRunner() {
  std::error_code ec;
  fs::remove_all(view_, ec);
}

EngineRun EngineRunner::run(int prompt_tokens, int gen_tokens, int prefill_chunk) {
  std::vector<std::string> argv = {binary_.string(), "generate", "--model", view_.string(), "--prompt-ids",
                                   prompts::ids_text(prompts::golden_prompt(0, prompt_tokens, vocab_)), "--max-new-tokens",
                                   std::to_string(gen_tokens), "--threads", std::to_string(threads_)};
  if (prefill_chunk > 0) argv.insert(argv.end(), {"--prefill-chunk", std::to_string(prefill_chunk)});
  if (mark_) argv.push_back("--mark-prompt-start");
  IdStreamClock clock;
  process::RunOptions options;
  options.timeout_s = timeout_s_;
  const process::RunResult r =
      process::run_streaming(argv, [&](double t, std::string_view chunk) { clock.feed(t, chunk); }, options);
  // An older engine's command line (CLI11) names the flag it does not know; run it the old way from now on.
  if (mark_ && r.exit_code != 0 && !r.timed_out && r.err.find("--mark-prompt-start") != std::string::npos) {
    mark_ = false;
    return run(prompt_tokens, gen_tokens, prefill_chunk);
  }
  EngineRun run;
  run.prompt_start_s = clock.prompt_start();
  run.exit_code = r.exit_code;
  run.timed_out = r.timed_out;
  run.arrivals_s = clock.arrivals();
  run.peak_rss_kb = r.peak_rss_kb;
  run.wall_s = r.wall_s;
  argv[5] = std::string("<").append(std::to_string(prompt_tokens)).append(" ids>");
  for (const auto& a : argv) run.command += (run.command.empty() ? "" : " ") + a;
  if (r.timed_out)
    run.error = "the engine timed out after " + std::to_string(int(timeout_s_)) + " s";
  else if (r.exit_code != 0)
    run.error = "the engine exited with status " + std::to_string(r.exit_code) + ": " + process::tail(r.err + r.out, 600);
  else if (int(run.arrivals_s.size()) != gen_tokens)
    run.error = "the engine printed " + std::to_string(run.arrivals_s.size()) + " ids, expected " +
                std::to_string(gen_tokens) + ": " + process::tail(r.out, 300);
  else if (mark_ && run.prompt_start_s < 0)
    run.error = "the engine accepted --mark-prompt-start but wrote no '@' before its first id: " + process::tail(r.out, 300);
  return run;
}

}  // namespace mi::bench
