#include "agents/openai_backend.h"

#include "common/error.h"
#include "servebench/sse_parser.h"

namespace mi::agents {
namespace {

using nlohmann::json;

long int_or_zero(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number_integer() ? obj[key].get<long>() : 0;
}

std::string string_or_empty(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : std::string();
}

Usage parse_usage(const json& usage) {
  return {int_or_zero(usage, "prompt_tokens"), int_or_zero(usage, "completion_tokens")};
}

}  // namespace

std::string normalise_openai_finish(const std::string& finish_reason) {
  if (finish_reason == "stop") return "end_turn";
  if (finish_reason == "tool_calls" || finish_reason == "function_call") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  return finish_reason;
}

json parse_tool_arguments(const std::string& text) {
  // Some servers send "" for a call without arguments; that is an empty object, not an error.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return nullptr;
  return j;
}

json openai_request_body(const ChatRequest& request, const std::string& model, bool stream, const std::string& max_tokens_field) {
  json messages = json::array();
  if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
  for (const Message& m : request.messages) {
    switch (m.role) {
      case Role::user:
        messages.push_back({{"role", "user"}, {"content", m.text}});
        break;
      case Role::assistant: {
        json a = {{"role", "assistant"}};
        // content null is how the API spells "only tool calls"
        a["content"] = m.text.empty() && !m.tool_calls.empty() ? json(nullptr) : json(m.text);
        if (!m.tool_calls.empty()) {
          json calls = json::array();
          for (const ToolCall& c : m.tool_calls) {
            const std::string args = c.arguments.is_null() ? c.raw_arguments : c.arguments.dump();
            calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
          }
          a["tool_calls"] = calls;
        }
        messages.push_back(a);
        break;
      }
      case Role::tool:
        messages.push_back({{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", m.text}});
        break;
    }
  }
  json body = {{"model", model}, {"messages", messages}, {"stream", stream}};
  if (request.max_tokens > 0) body[max_tokens_field] = request.max_tokens;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& t : request.tools)
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
    body["tools"] = tools;
    body["tool_choice"] = "auto";
  }
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body;
}

ChatResponse parse_openai_response(const json& body) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].empty() ||
      !body["choices"][0].is_object() || !body["choices"][0].contains("message") ||
      !body["choices"][0]["message"].is_object())
    fail("OpenAI response: expected choices[0].message, got ", body.dump().substr(0, 300));
  const json& choice = body["choices"][0];
  const json& msg = choice["message"];
  ChatResponse r;
  r.message.role = Role::assistant;
  r.message.text = string_or_empty(msg, "content");
  if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
    for (const json& c : msg["tool_calls"]) {
      const json fn = c.value("function", json::object());
      ToolCall call{string_or_empty(c, "id"), string_or_empty(fn, "name"), nullptr, string_or_empty(fn, "arguments")};
      call.arguments = parse_tool_arguments(call.raw_arguments);
      if (call.name.empty()) fail("OpenAI response: tool call without a function name: ", c.dump().substr(0, 300));
      r.message.tool_calls.push_back(call);
    }
  }
  r.stop_reason = normalise_openai_finish(string_or_empty(choice, "finish_reason"));
  if (body.contains("usage")) r.usage = parse_usage(body["usage"]);
  return r;
}

void OpenAiStreamAccumulator::add(const json& chunk) {
  if (!chunk.is_object()) return;
  if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = parse_usage(chunk["usage"]);
  if (!chunk.contains("choices") || !chunk["choices"].is_array()) return;
  for (const json& choice : chunk["choices"]) {
    any_choice_ = true;
    const std::string finish = string_or_empty(choice, "finish_reason");
    if (!finish.empty()) finish_reason_ = finish;
    if (!choice.contains("delta") || !choice["delta"].is_object()) continue;
    const json& delta = choice["delta"];
    text_ += string_or_empty(delta, "content");
    if (!delta.contains("tool_calls") || !delta["tool_calls"].is_array()) continue;
    for (const json& piece : delta["tool_calls"]) {
      const int index = piece.contains("index") && piece["index"].is_number_integer() ? piece["index"].get<int>() : 0;
      PartialCall& call = calls_[index];
      if (const std::string id = string_or_empty(piece, "id"); !id.empty()) call.id = id;
      if (piece.contains("function") && piece["function"].is_object()) {
        // The name arrives whole in one piece (some servers repeat it); arguments arrive in fragments.
        if (const std::string name = string_or_empty(piece["function"], "name"); !name.empty()) call.name = name;
        call.arguments += string_or_empty(piece["function"], "arguments");
      }
    }
  }
}

ChatResponse OpenAiStreamAccumulator::finish() {
  if (!any_choice_) fail("OpenAI stream: no chunk carried a choice");
  ChatResponse r;
  r.message.role = Role::assistant;
  r.message.text = text_;
  for (const auto& [index, c] : calls_) {
    if (c.name.empty()) fail("OpenAI stream: tool call ", index, " has no function name");
    r.message.tool_calls.push_back({c.id, c.name, parse_tool_arguments(c.arguments), c.arguments});
  }
  r.stop_reason = normalise_openai_finish(finish_reason_);
  r.usage = usage_;
  return r;
}

OpenAiBackend::OpenAiBackend(BackendConfig config) : config_(std::move(config)), http_(config_.base_url, config_.http) {
  if (config_.openai_max_tokens_field != "max_tokens" && config_.openai_max_tokens_field != "max_completion_tokens")
    fail("openai backend: the output bound is max_tokens or max_completion_tokens, not '", config_.openai_max_tokens_field, "'");
}

std::string OpenAiBackend::describe() const { return "openai " + config_.base_url + " model=" + config_.model; }

ChatResponse OpenAiBackend::chat(const ChatRequest& request) {
  const bool stream = request.stream || config_.stream;
  std::map<std::string, std::string> headers = {{"Content-Type", "application/json"}};
  if (!config_.api_key.empty()) headers["Authorization"] = "Bearer " + config_.api_key;
  if (stream) headers["Accept"] = "text/event-stream";
  const std::string body = openai_request_body(request, config_.model, stream, config_.openai_max_tokens_field).dump();
  const std::string where = "POST " + config_.base_url + "/chat/completions";

  if (!stream) {
    int attempts = 0;
    ChatResponse out = parse_openai_response(json::parse(post_for_json_text(http_, "/chat/completions", headers, body, where, attempts)));
    out.http_attempts = attempts;
    return out;
  }

  OpenAiStreamAccumulator acc;
  std::string bad_event;
  bool done = false;
  servebench::SseParser parser([&](std::string_view data) {
    if (data == "[DONE]") {
      done = true;
      return false;
    }
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded()) {
      bad_event = std::string(data.substr(0, 300));
      return false;
    }
    if (chunk.is_object() && chunk.contains("error")) {
      bad_event = chunk.dump().substr(0, 300);
      return false;
    }
    acc.add(chunk);
    return true;
  });
  const HttpResult r = http_.post("/chat/completions", headers, body, [&](std::string_view piece) { return parser.feed(piece); });
  if (r.status != 200) fail(where, " (stream): ", describe_http_failure(r), " (after ", r.attempts, " attempt", r.attempts == 1 ? "" : "s", ")");
  if (!done && bad_event.empty()) parser.finish();
  if (!bad_event.empty()) fail(where, " (stream): bad event: ", bad_event);
  if (!parser.error().empty()) fail(where, " (stream): ", parser.error());
  ChatResponse out = acc.finish();
  out.http_attempts = r.attempts;
  return out;
}

}  // namespace mi::agents
