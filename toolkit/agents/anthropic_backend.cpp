#include "agents/anthropic_backend.h"

#include "agents/openai_backend.h"  // parse_tool_arguments
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

}  // namespace

std::string normalise_anthropic_stop(const std::string& stop_reason) {
  if (stop_reason == "stop_sequence") return "end_turn";
  return stop_reason;
}

json anthropic_request_body(const ChatRequest& request, const std::string& model, bool stream) {
  json messages = json::array();
  for (const Message& m : request.messages) {
    switch (m.role) {
      case Role::user:
        messages.push_back({{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", m.text}}})}});
        break;
      case Role::assistant: {
        json content = json::array();
        if (!m.text.empty()) content.push_back({{"type", "text"}, {"text", m.text}});
        for (const ToolCall& c : m.tool_calls)
          content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name},
                             {"input", c.arguments.is_object() ? c.arguments : json::object()}});
        messages.push_back({{"role", "assistant"}, {"content", content}});
        break;
      }
      case Role::tool: {
        json block = {{"type", "tool_result"}, {"tool_use_id", m.tool_call_id}, {"content", m.text}};
        if (m.is_error) block["is_error"] = true;
        // Results of one assistant turn share one user message.
        if (!messages.empty() && messages.back()["role"] == "user" && !messages.back()["content"].empty() &&
            messages.back()["content"].back().value("type", "") == "tool_result")
          messages.back()["content"].push_back(block);
        else
          messages.push_back({{"role", "user"}, {"content", json::array({block})}});
        break;
      }
    }
  }
  json body = {{"model", model}, {"max_tokens", request.max_tokens > 0 ? request.max_tokens : 4096},
               {"messages", messages}};
  if (!request.system.empty()) body["system"] = request.system;
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolSpec& t : request.tools)
      tools.push_back({{"name", t.name}, {"description", t.description}, {"input_schema", t.parameters}});
    body["tools"] = tools;
  }
  if (stream) body["stream"] = true;
  return body;
}

ChatResponse parse_anthropic_response(const json& body) {
  if (!body.is_object() || !body.contains("content") || !body["content"].is_array())
    fail("Anthropic response: expected a message with content[], got ", body.dump().substr(0, 300));
  ChatResponse r;
  r.message.role = Role::assistant;
  for (const json& block : body["content"]) {
    const std::string type = string_or_empty(block, "type");
    if (type == "text") {
      r.message.text += string_or_empty(block, "text");
    } else if (type == "tool_use") {
      ToolCall c{string_or_empty(block, "id"), string_or_empty(block, "name"), nullptr, ""};
      if (block.contains("input")) {
        c.raw_arguments = block["input"].dump();
        c.arguments = block["input"].is_object() ? block["input"] : json(nullptr);
      }
      if (c.name.empty()) fail("Anthropic response: tool_use block without a name: ", block.dump().substr(0, 300));
      r.message.tool_calls.push_back(c);
    }
    // thinking and other block kinds carry nothing the runner acts on
  }
  r.stop_reason = normalise_anthropic_stop(string_or_empty(body, "stop_reason"));
  if (body.contains("usage")) r.usage = {int_or_zero(body["usage"], "input_tokens"), int_or_zero(body["usage"], "output_tokens")};
  return r;
}

void AnthropicStreamAccumulator::add(const json& event) {
  const std::string type = string_or_empty(event, "type");
  if (type == "error") fail("Anthropic stream: error event: ", event.dump().substr(0, 300));
  if (type == "message_start") {
    started_ = true;
    const json msg = event.value("message", json::object());
    if (msg.contains("usage")) {
      usage_.input_tokens = int_or_zero(msg["usage"], "input_tokens");
      usage_.output_tokens = int_or_zero(msg["usage"], "output_tokens");
    }
  } else if (type == "content_block_start") {
    const int index = event.value("index", 0);
    const json cb = event.value("content_block", json::object());
    Block& b = blocks_[index];
    b.type = string_or_empty(cb, "type");
    b.text = string_or_empty(cb, "text");
    b.id = string_or_empty(cb, "id");
    b.name = string_or_empty(cb, "name");
  } else if (type == "content_block_delta") {
    Block& b = blocks_[event.value("index", 0)];
    const json delta = event.value("delta", json::object());
    const std::string dt = string_or_empty(delta, "type");
    if (dt == "text_delta") b.text += string_or_empty(delta, "text");
    else if (dt == "input_json_delta") b.json += string_or_empty(delta, "partial_json");
  } else if (type == "message_delta") {
    const json delta = event.value("delta", json::object());
    if (const std::string s = string_or_empty(delta, "stop_reason"); !s.empty()) stop_reason_ = s;
    // message_delta's usage is cumulative for the output side
    if (event.contains("usage") && event["usage"].contains("output_tokens"))
      usage_.output_tokens = int_or_zero(event["usage"], "output_tokens");
  } else if (type == "message_stop") {
    stopped_ = true;
  }
}

ChatResponse AnthropicStreamAccumulator::finish() {
  if (!started_) fail("Anthropic stream: no message_start event");
  ChatResponse r;
  r.message.role = Role::assistant;
  for (const auto& [index, b] : blocks_) {
    if (b.type == "text") {
      r.message.text += b.text;
    } else if (b.type == "tool_use") {
      if (b.name.empty()) fail("Anthropic stream: tool_use block ", index, " has no name");
      r.message.tool_calls.push_back({b.id, b.name, parse_tool_arguments(b.json), b.json});
    }
  }
  r.stop_reason = normalise_anthropic_stop(stop_reason_);
  r.usage = usage_;
  return r;
}

AnthropicBackend::AnthropicBackend(BackendConfig config) : config_(std::move(config)), http_(config_.base_url, config_.http) {}

std::string AnthropicBackend::describe() const { return "anthropic " + config_.base_url + " model=" + config_.model; }

ChatResponse AnthropicBackend::chat(const ChatRequest& request) {
  const bool stream = request.stream || config_.stream;
  std::map<std::string, std::string> headers = {{"Content-Type", "application/json"},
                                                {"anthropic-version", kAnthropicVersion}};
  if (!config_.api_key.empty()) headers["x-api-key"] = config_.api_key;
  if (stream) headers["Accept"] = "text/event-stream";
  const std::string body = anthropic_request_body(request, config_.model, stream).dump();
  const std::string where = "POST " + config_.base_url + "/v1/messages";

  if (!stream) {
    int attempts = 0;
    ChatResponse out = parse_anthropic_response(json::parse(post_for_json_text(http_, "/v1/messages", headers, body, where, attempts)));
    out.http_attempts = attempts;
    return out;
  }

  AnthropicStreamAccumulator acc;
  std::string bad_event;
  servebench::SseParser parser([&](std::string_view data) {
    const json event = json::parse(data, nullptr, false);
    if (event.is_discarded()) {
      bad_event = "not JSON: " + std::string(data.substr(0, 300));
      return false;
    }
    try {
      acc.add(event);
    } catch (const Error& e) {
      bad_event = e.what();
      return false;
    }
    return !acc.stopped();
  });
  const HttpResult r = http_.post("/v1/messages", headers, body, [&](std::string_view piece) { return parser.feed(piece); });
  if (r.status != 200) fail(where, " (stream): ", describe_http_failure(r), " (after ", r.attempts, " attempt", r.attempts == 1 ? "" : "s", ")");
  if (!acc.stopped() && bad_event.empty()) parser.finish();
  if (!bad_event.empty()) fail(where, " (stream): ", bad_event);
  if (!parser.error().empty()) fail(where, " (stream): ", parser.error());
  if (!acc.stopped()) fail(where, " (stream): ended without message_stop");
  ChatResponse out = acc.finish();
  out.http_attempts = r.attempts;
  return out;
}

}  // namespace mi::agents
