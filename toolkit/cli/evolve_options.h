// Knowledge-base evolution as a command: one implementation behind `metainfer evolve <constraints.toml>` (the
// user-facing entry: runs coverage first and evolves only what the plan says is missing) and `metainfer agents
// evolve` (the building block: also takes a free-text target). Both end in agents::evolve().
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "cli/llm_flags.h"

namespace mi::cli {

struct EvolveOptions {
  LlmFlags llm;
  std::string work_dir, target, target_file, constraints, model, contracts, stage = "target";
  int rounds = 3, repair_rounds = 1;
  bool resume = false, force = false;
  double gate_timeout_s = 600;
};

// top_level: `metainfer evolve [constraints.toml]` (positional constraints, --force, default --work-dir);
// otherwise `agents evolve` (--constraints, --target, --target-file; --work-dir required).
void add_evolve_options(CLI::App* cmd, EvolveOptions& options, bool top_level);

// Runs (or resumes) the evolution; prints one JSON line last; returns the exit status: 0 absorbed or already
// covered, 1 failed or interrupted. mi::Error for bad input.
int run_evolve(const EvolveOptions& options);

}  // namespace mi::cli
