// Anthropic Messages API: POST {base_url}/v1/messages with x-api-key and anthropic-version. The system prompt is a
// top-level field; an assistant turn's tool calls are `tool_use` content blocks (input is a JSON object, not a
// string); tool results go back as `tool_result` blocks inside one *user* message (consecutive results of one turn
// are merged, because the API wants them in the message right after the tool_use turn). Streaming sends typed
// events: message_start (input tokens), content_block_start/delta/stop (text_delta, input_json_delta pieces),
// message_delta (stop_reason, output tokens), message_stop.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "agents/llm_backend.h"

namespace mi::agents {

class AnthropicBackend : public LlmBackend {
 public:
  explicit AnthropicBackend(BackendConfig config);
  ChatResponse chat(const ChatRequest& request) override;
  std::string describe() const override;

 private:
  BackendConfig config_;
  HttpTransport http_;
};

inline constexpr const char* kAnthropicVersion = "2023-06-01";

nlohmann::json anthropic_request_body(const ChatRequest& request, const std::string& model, bool stream);
ChatResponse parse_anthropic_response(const nlohmann::json& body);

class AnthropicStreamAccumulator {
 public:
  // Throws mi::Error for an `error` event.
  void add(const nlohmann::json& event);
  bool stopped() const { return stopped_; }
  ChatResponse finish();

 private:
  struct Block {
    std::string type, text, id, name, json;
  };
  std::map<int, Block> blocks_;
  std::string stop_reason_;
  Usage usage_;
  bool started_ = false, stopped_ = false;
};

// "end_turn"/"stop_sequence" -> "end_turn"; "tool_use" and "max_tokens" unchanged.
std::string normalise_anthropic_stop(const std::string& stop_reason);

}  // namespace mi::agents
