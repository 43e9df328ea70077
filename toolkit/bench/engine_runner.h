// Runs our engine for one measurement, as a client would: the B0-built binary as a subprocess, `generate
// --prompt-ids ... --max-new-tokens N --threads T [--prefill-chunk C] --mark-prompt-start`, with the arrival time of
// every generated token on its stdout pipe (process::run_streaming), the arrival of the '@' the engine writes when
// its model is loaded and the prompt starts (this run's own start-up: TTFT counts from it), and its peak RSS from
// wait4. An engine generated before --mark-prompt-start existed rejects the flag: the runner then runs it without
// (mark_prompt_start() false) and the bench falls back to subtracting its best start-up.
//
// The engine streams ids ("5,17,3\n", flushed per token) only when the checkpoint has no tokenizer, and stops early
// at an end-of-sequence id. So the engine is given a view of the checkpoint: a temporary directory holding
// config.json without `eos_token_id` (a field every family lists in config_ignored) and symlinks to the weights.
// Every run then generates exactly N tokens, as llama-bench's do.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::bench {

struct EngineRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string error;                 // empty when the run succeeded and produced every token
  std::vector<double> arrivals_s;    // per generated token: when its text arrived, seconds after the fork
  double prompt_start_s = -1;        // when the engine's '@' arrived (model loaded, prompt starting); -1: none
  long peak_rss_kb = 0;
  double wall_s = 0;
  std::string command;               // argv joined, the prompt ids elided
};

class EngineRunner {
 public:
  // mi::Error when the binary is missing or the checkpoint has no config.json.
  EngineRunner(std::filesystem::path binary, const std::filesystem::path& checkpoint, int threads, int vocab,
               double timeout_s = 900);
  ~EngineRunner();
  EngineRunner(const EngineRunner&) = delete;
  EngineRunner& operator=(const EngineRunner&) = delete;

  EngineRun run(int prompt_tokens, int gen_tokens, int prefill_chunk = 0);
  // Whether runs pass --mark-prompt-start (false once the engine rejected it).
  bool mark_prompt_start() const { return mark_; }

  const std::filesystem::path& view() const { return view_; }
  int threads() const { return threads_; }

 private:
  std::filesystem::path binary_, view_;
  int threads_, vocab_;
  double timeout_s_;
  bool mark_ = true;
};

// Token arrivals in an id stream ("@5,17,3\n"): each id's first digit starts a token; an '@' before the first id is
// the engine's prompt-start mark. Feed chunks in order.
class IdStreamClock {
 public:
  void feed(double t_s, std::string_view chunk);
  const std::vector<double>& arrivals() const { return arrivals_; }
  double prompt_start() const { return prompt_start_; }  // -1: no mark

 private:
  std::vector<double> arrivals_;
  double prompt_start_ = -1;
  bool in_id_ = false, done_ = false;
};

}  // namespace mi::bench
