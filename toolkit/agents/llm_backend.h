// What the conversation runner needs from an LLM: one chat turn with tools. Implementations speak one wire format
// each (openai_backend, anthropic_backend); make_backend picks one from a BackendConfig.
#pragma once
#include <memory>
#include <string>

#include "agents/http_transport.h"
#include "agents/llm_types.h"

namespace mi::agents {

class LlmBackend {
 public:
  virtual ~LlmBackend() = default;
  // One turn. Throws mi::Error when the endpoint cannot be reached or keeps failing after the retries, or returns
  // something that is not a well-formed response (the message names the endpoint, the status and the cause).
  virtual ChatResponse chat(const ChatRequest& request) = 0;
  virtual std::string describe() const = 0;  // "openai http://127.0.0.1:8000/v1 model=qwen3"
};

struct BackendConfig {
  std::string provider;  // "openai" (any OpenAI-compatible server) | "anthropic"
  std::string base_url;  // openai: up to and including /v1; anthropic: without /v1
  std::string model;
  std::string api_key;   // may be empty for local servers
  bool stream = false;   // request SSE streaming (the result is the same ChatResponse)
  HttpOptions http;
  // openai: the field that bounds the output. Local servers and older models take "max_tokens"; OpenAI's reasoning
  // models refuse it and want "max_completion_tokens".
  std::string openai_max_tokens_field = "max_tokens";
};

// Fills what `config` leaves empty from the environment: OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL, or
// ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY / ANTHROPIC_MODEL; then the public defaults
// (https://api.openai.com/v1, https://api.anthropic.com). Flags win over the environment because the caller set them.
BackendConfig resolve_backend_config(BackendConfig config);

// Throws mi::Error for an unknown provider, a missing model, or a bad URL.
std::unique_ptr<LlmBackend> make_backend(const BackendConfig& config);

}  // namespace mi::agents
