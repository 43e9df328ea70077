// The LLM endpoint flags every agent-driven command shares (`agents converse|stage|evolve`, `generate --backend
// agents`, `evolve`): one definition, so a flag means the same thing, with the same default and environment
// fallback, wherever a user meets it. The API key is read from an environment variable, never from a flag (flags
// are visible to every user in ps).
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "agents/agent_run.h"
#include "agents/llm_backend.h"

namespace mi::cli {

struct LlmFlags {
  std::string provider = "openai", url, model, key_env, source_switch = "off", ckb_dir;
  std::string ca_cert, max_tokens_field = "max_tokens";
  std::vector<std::string> references;
  bool stream = false;
  double timeout_s = 300;
  int attempts = 5, max_turns = 40, max_tokens = 4096;
};

// Adds --llm, --llm-url, --llm-model, --llm-key-env, --llm-stream, --llm-ca-cert, --llm-max-tokens-field,
// --llm-timeout-s, --llm-attempts, --max-turns, --max-tokens, --source-switch, --reference, and (with_ckb) --ckb.
// A command that has its own --ckb (generate) passes with_ckb = false and sets flags.ckb_dir itself.
void add_llm_flags(CLI::App* cmd, LlmFlags& flags, bool with_ckb = true);

// Validators for counts and limits, with messages a user reads (CLI11 prefixes the flag; exit 2): a whole number of
// at least `min`; a positive number of seconds.
CLI::Validator whole_number_at_least(int min);
CLI::Validator positive_seconds();

// The LLM flags of `cmd` the user actually gave (for commands where they only apply in one mode).
std::vector<std::string> given_llm_flags(const CLI::App* cmd);

// The backend configuration, with the environment's defaults resolved; mi::Error (exit 2) for a key variable that is
// not set or an endpoint/model that is missing.
agents::BackendConfig backend_config(const LlmFlags& flags);

// The --reference trees, canonical (symlinks resolved): what the gates hide from the agent-written code they run.
std::vector<std::filesystem::path> reference_trees(const LlmFlags& flags);

// An agent run in an existing run directory, with the flags' sandbox settings and a fresh backend.
std::unique_ptr<agents::AgentRun> make_agent_run(const LlmFlags& flags, const std::filesystem::path& run_dir);

// The whole text of a file named by a flag; mi::Error naming the flag when it cannot be read.
std::string read_flag_file(const std::string& flag, const std::string& file);

}  // namespace mi::cli
