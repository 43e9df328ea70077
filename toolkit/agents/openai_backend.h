// OpenAI-compatible Chat Completions with tool calling: hosted OpenAI and the local servers that copy its API
// (vLLM, SGLang, llama.cpp's server, our engines' server). POST {base_url}/chat/completions, "Authorization: Bearer"
// when a key is set. Tools go out as {"type":"function","function":{name,description,parameters}}; the reply's
// message.tool_calls carry arguments as a JSON *string*, parsed here. Streaming (SSE) sends deltas whose tool-call
// pieces are joined by their `index`; usage arrives in a last chunk because we ask for stream_options.include_usage.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "agents/llm_backend.h"

namespace mi::agents {

class OpenAiBackend : public LlmBackend {
 public:
  explicit OpenAiBackend(BackendConfig config);
  ChatResponse chat(const ChatRequest& request) override;
  std::string describe() const override;

 private:
  BackendConfig config_;
  HttpTransport http_;
};

// The wire format, apart from HTTP so tests can check it directly.
nlohmann::json openai_request_body(const ChatRequest& request, const std::string& model, bool stream,
                                   const std::string& max_tokens_field = "max_tokens");
// A non-streamed response body. Throws mi::Error for a body without choices[0].message.
ChatResponse parse_openai_response(const nlohmann::json& body);

// Joins streamed chunks into one response.
class OpenAiStreamAccumulator {
 public:
  void add(const nlohmann::json& chunk);
  ChatResponse finish();  // throws mi::Error when no chunk carried a choice

 private:
  struct PartialCall {
    std::string id, name, arguments;
  };
  std::string text_, finish_reason_;
  std::map<int, PartialCall> calls_;  // by the delta's index: pieces of one call share it
  Usage usage_;
  bool any_choice_ = false;
};

// "stop" -> "end_turn", "tool_calls" -> "tool_use", "length" -> "max_tokens"; others unchanged.
std::string normalise_openai_finish(const std::string& finish_reason);
// Parses a tool call's arguments string: an object, or null (raw text kept by the caller) when it is not one.
nlohmann::json parse_tool_arguments(const std::string& text);

}  // namespace mi::agents
