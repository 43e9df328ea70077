#include "agents/llm_backend.h"

#include <cstdlib>

#include "agents/anthropic_backend.h"
#include "agents/openai_backend.h"
#include "common/error.h"

namespace mi::agents {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

BackendConfig resolve_backend_config(BackendConfig config) {
  if (config.provider.empty()) config.provider = "openai";
  if (config.provider == "openai") {
    if (config.base_url.empty()) config.base_url = env_or("OPENAI_BASE_URL", "https://api.openai.com/v1");
    if (config.api_key.empty()) config.api_key = env_or("OPENAI_API_KEY", "");
    if (config.model.empty()) config.model = env_or("OPENAI_MODEL", "");
  } else if (config.provider == "anthropic") {
    if (config.base_url.empty()) config.base_url = env_or("ANTHROPIC_BASE_URL", "https://api.anthropic.com");
    if (config.api_key.empty()) config.api_key = env_or("ANTHROPIC_API_KEY", "");
    if (config.model.empty()) config.model = env_or("ANTHROPIC_MODEL", "");
  }
  return config;
}

std::unique_ptr<LlmBackend> make_backend(const BackendConfig& config) {
  if (config.model.empty())
    fail("LLM backend '", config.provider, "': no model (give --llm-model, or set ",
         config.provider == "anthropic" ? "ANTHROPIC_MODEL" : "OPENAI_MODEL", ")");
  if (config.provider == "openai") return std::make_unique<OpenAiBackend>(config);
  if (config.provider == "anthropic") return std::make_unique<AnthropicBackend>(config);
  fail("LLM backend: unknown provider '", config.provider, "' (expected openai or anthropic)");
}

}  // namespace mi::agents
