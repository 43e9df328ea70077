// The provider-neutral shape of a tool-calling conversation. Backends translate it to and from their wire formats
// (OpenAI Chat Completions, Anthropic Messages), so the conversation runner, the transcript and the metrics never
// depend on which API an endpoint speaks.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::agents {

// One call the model asked for. `arguments` is the parsed JSON object; when the model produced text that is not a
// JSON object, `arguments` is null and `raw_arguments` keeps the text so the runner can tell the model what was wrong.
struct ToolCall {
  std::string id, name;
  nlohmann::json arguments;
  std::string raw_arguments;
};

enum class Role { user, assistant, tool };

// System prompts are not messages: both APIs carry them apart from the turns (Anthropic requires that).
struct Message {
  Role role = Role::user;
  std::string text;                  // user/assistant text; for a tool message, the tool's result
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only: which call this answers
  bool is_error = false;             // tool only: the tool refused or failed
};

// A tool the model may call: JSON Schema of its arguments object.
struct ToolSpec {
  std::string name, description;
  nlohmann::json parameters;
};

struct ChatRequest {
  std::string system;
  std::vector<Message> messages;
  std::vector<ToolSpec> tools;
  int max_tokens = 4096;  // Anthropic requires a bound; OpenAI-compatible servers get it as max_tokens
  bool stream = false;
};

// Token counts as the endpoint reported them in `usage` (never estimated by us).
struct Usage {
  long input_tokens = 0, output_tokens = 0;
};

struct ChatResponse {
  Message message;          // role assistant
  std::string stop_reason;  // normalised: "end_turn", "tool_use", "max_tokens", or the provider's own word
  Usage usage;
  int http_attempts = 0;    // 1 + retries it took
};

const char* role_name(Role r);

}  // namespace mi::agents
