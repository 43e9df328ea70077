#include "cli/llm_flags.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <sstream>

#include "ckb/ckb.h"
#include "common/error.h"

namespace mi::cli {
namespace fs = std::filesystem;

namespace {
const std::vector<std::string> kLlmFlagNames = {"--llm", "--llm-url", "--llm-model", "--llm-key-env", "--llm-stream", "--llm-ca-cert",
                                                "--llm-max-tokens-field", "--llm-timeout-s", "--llm-attempts", "--max-turns",
                                                "--max-tokens", "--source-switch", "--reference"};
}

CLI::Validator whole_number_at_least(int min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        long long v = 0;
        std::size_t used = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || used == 0 || v < min || v > std::numeric_limits<int>::max())
          return "must be a whole number >= " + std::to_string(min) + ", got '" + text + "'";
        return "";
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        std::size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || used == 0 || !(v > 0) || !std::isfinite(v)) return "must be a positive number of seconds, got '" + text + "'";
        return "";
      },
      "SECONDS>0");
}

void add_llm_flags(CLI::App* cmd, LlmFlags& f, bool with_ckb) {
  cmd->add_option("--llm", f.provider, "API the endpoint speaks: openai (Chat Completions; vLLM, SGLang, llama.cpp server, OpenAI) or anthropic (Messages)")
      ->check(CLI::IsMember({"openai", "anthropic"}))->capture_default_str();
  cmd->add_option("--llm-url", f.url, "base URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1; $ANTHROPIC_BASE_URL or https://api.anthropic.com)");
  cmd->add_option("--llm-model", f.model, "model name (default: $OPENAI_MODEL / $ANTHROPIC_MODEL)");
  cmd->add_option("--llm-key-env", f.key_env, "environment variable holding the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY)");
  cmd->add_flag("--llm-stream", f.stream, "stream responses (SSE)");
  cmd->add_option("--llm-ca-cert", f.ca_cert, "https: trust this PEM CA bundle instead of the system store");
  cmd->add_option("--llm-max-tokens-field", f.max_tokens_field, "openai: max_tokens (local servers) or max_completion_tokens (OpenAI reasoning models)")
      ->check(CLI::IsMember({"max_tokens", "max_completion_tokens"}))->capture_default_str();
  // Counts and limits must be positive: 0 turns or a negative timeout would make every run fail in a way that looks
  // like the endpoint's fault. CLI11 names the flag in its error (exit 2).
  cmd->add_option("--llm-timeout-s", f.timeout_s, "per-request timeout")->check(positive_seconds())->capture_default_str();
  cmd->add_option("--llm-attempts", f.attempts, "tries per request (429 and 5xx are retried with backoff)")
      ->check(whole_number_at_least(1))->capture_default_str();
  cmd->add_option("--max-turns", f.max_turns, "LLM requests per conversation")->check(whole_number_at_least(1))->capture_default_str();
  cmd->add_option("--max-tokens", f.max_tokens, "output tokens per response")->check(whole_number_at_least(1))->capture_default_str();
  cmd->add_option("--source-switch", f.source_switch, "off: no agent may read reference sources; on: only the explorer may, logged")
      ->check(CLI::IsMember({"off", "on"}))->capture_default_str();
  cmd->add_option("--reference", f.references, "a reference source tree (repeatable): blocked with the switch off");
  if (with_ckb) {
    f.ckb_dir = ckb::default_ckb_dir().string();
    cmd->add_option("--ckb", f.ckb_dir, "CKB directory (roles from its roles/)");
  }
}

std::vector<std::string> given_llm_flags(const CLI::App* cmd) {
  std::vector<std::string> given;
  for (const auto& name : kLlmFlagNames)
    if (cmd->count(name) > 0) given.push_back(name);
  return given;
}

namespace {

// The providers' public endpoints (the defaults when no URL is given): they always want a key.
bool hosted_api(const std::string& url) {
  const std::size_t scheme = url.find("://");
  std::string host = url.substr(scheme == std::string::npos ? 0 : scheme + 3);
  host = host.substr(0, host.find_first_of("/:?"));
  return host == "api.openai.com" || host == "api.anthropic.com";
}

}  // namespace

agents::BackendConfig backend_config(const LlmFlags& f) {
  agents::BackendConfig bc;
  bc.provider = f.provider;
  bc.base_url = f.url;
  bc.model = f.model;
  if (!f.key_env.empty()) {
    const char* key = std::getenv(f.key_env.c_str());
    if (!key || !*key) fail("--llm-key-env: the environment variable ", f.key_env, " is not set");
    bc.api_key = key;
  }
  bc.stream = f.stream;
  bc.openai_max_tokens_field = f.max_tokens_field;
  bc.http.ca_cert_file = f.ca_cert;
  bc.http.timeout_s = f.timeout_s;
  bc.http.retry.max_attempts = std::max(1, f.attempts);
  bc = agents::resolve_backend_config(bc);
  // Without this a hosted run would lay its directories down and record a round before the first request came back
  // 401. Local and private servers (vLLM, llama-server) need no key, so only the public APIs are held to it.
  // A missing model is make_backend's to name first (every caller calls it next); then the key.
  if (!bc.model.empty() && bc.api_key.empty() && hosted_api(bc.base_url)) {
    const std::string var = !f.key_env.empty() ? f.key_env : bc.provider == "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
    fail("no API key for ", bc.base_url, ": set ", var, " (or name the variable holding it with --llm-key-env), or point --llm-url at a local server");
  }
  return bc;
}

std::vector<fs::path> reference_trees(const LlmFlags& f) {
  std::vector<fs::path> out;
  for (const auto& r : f.references) out.push_back(fs::weakly_canonical(fs::absolute(r)));
  return out;
}

std::unique_ptr<agents::AgentRun> make_agent_run(const LlmFlags& f, const fs::path& run_dir) {
  if (!fs::is_directory(run_dir)) fail("--run-dir: '", run_dir.string(), "' is not a directory");
  const agents::BackendConfig bc = backend_config(f);
  agents::AgentRunConfig cfg;
  cfg.sandbox.run_dir = run_dir;
  cfg.sandbox.ckb_dir = f.ckb_dir;
  for (const auto& r : f.references) cfg.sandbox.reference_paths.push_back(r);
  cfg.sandbox.source_switch = agents::parse_source_switch(f.source_switch);
  cfg.max_turns = f.max_turns;
  cfg.max_tokens = f.max_tokens;
  return std::make_unique<agents::AgentRun>(cfg, agents::make_backend(bc));
}

std::string read_flag_file(const std::string& flag, const std::string& file) {
  std::ifstream in(file);
  if (!in) fail(flag, ": cannot read '", file, "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mi::cli
