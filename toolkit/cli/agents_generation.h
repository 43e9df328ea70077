// `metainfer generate --backend agents`: the options it adds to `generate` and the run itself (after the knowledge
// generator laid the engine directory down). The workflow is toolkit/agents/engine_generation.h; this file is the
// command's side of it: flags, the gates' verifier binary, records, the printed result and the exit status.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ckb/ckb.h"
#include "cli/llm_flags.h"
#include "coverage/coverage.h"
#include "generator/generator.h"

namespace mi::cli {

struct AgentsGenerationOptions {
  LlmFlags llm;  // its ckb_dir is generate's --ckb
  int max_repair_rounds = 2;
  bool no_review = false;
  double gate_timeout_s = 1800;
  std::vector<std::string> golden;  // generate's --golden, for the final gates
};

// The LLM flags (without --ckb, which generate has) and --max-repair-rounds, --no-review, --gate-timeout-s.
void add_agents_generation_options(CLI::App* cmd, AgentsGenerationOptions& options);

// The agents-only flags the user gave (for refusing them with the knowledge backend).
std::vector<std::string> agents_generation_flags_given(const CLI::App* cmd);

// Runs the stages and the final gates in the engine directory; prints the result (JSON last line with --json, or
// always one JSON line last, like `agents stage`); returns the exit status (0 accepted, 1 not).
int run_agents_generation(const ckb::Ckb& ckb, const coverage::Plan& plan, const generator::Engine& engine,
                          const AgentsGenerationOptions& options, bool json, std::ostream& out);

}  // namespace mi::cli
