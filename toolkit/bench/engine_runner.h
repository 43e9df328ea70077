// Runs our engine for one measurement, as a client would: the B0-built binary as a subprocess, `generate
// --prompt-ids ... --max-new-tokens N --threads T [--prefill-chunk C]`, with the arrival time of every generated
// token on its stdout pipe (process::run_streaming) and its peak RSS from wait4.
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

  EngineRun run(int prompt_tokens, int gen_tokens, int prefill_chunk = 0) const;

  const std::filesystem::path& view() const { return view_; }
  int threads() const { return threads_; }

 private:
  std::filesystem::path binary_, view_;
  int threads_, vocab_;
  double timeout_s_;
};

// Token arrivals in an id stream ("5,17,3\n"): each id's first digit starts a token. Feed chunks in order.
class IdStreamClock {
 public:
  void feed(double t_s, std::string_view chunk);
  const std::vector<double>& arrivals() const { return arrivals_; }

 private:
  std::vector<double> arrivals_;
  bool in_id_ = false, done_ = false;
};

}  // namespace mi::bench
