#include "scripted_llm_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>

namespace mi_test {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::set<std::string> tool_names(const std::string& api, const json& body) {
  std::set<std::string> names;
  if (!body.contains("tools")) return names;
  for (const json& t : body["tools"])
    names.insert(api == "openai" ? t["function"]["name"].get<std::string>() : t["name"].get<std::string>());
  return names;
}

// "user", "tool" or "assistant": what the last turn of the conversation is, in either format.
std::string last_turn(const std::string& api, const json& body) {
  if (!body.contains("messages") || body["messages"].empty()) return "";
  const json& m = body["messages"].back();
  const std::string role = m.value("role", "");
  if (api == "anthropic" && role == "user" && m["content"].is_array() && !m["content"].empty() &&
      m["content"][0].value("type", "") == "tool_result")
    return "tool";
  return role;
}

std::string system_text(const std::string& api, const json& body) {
  if (api == "anthropic") return body.value("system", "");
  if (body.contains("messages") && !body["messages"].empty() && body["messages"][0].value("role", "") == "system")
    return body["messages"][0].value("content", "");
  return "";
}

std::string sse(const json& data, const std::string& event = "") {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

// Splits s in two halves (at least one piece), so streamed text and arguments arrive fragmented.
std::vector<std::string> halves(const std::string& s) {
  if (s.size() < 2) return {s};
  return {s.substr(0, s.size() / 2), s.substr(s.size() / 2)};
}

json openai_body(const json& r) {
  json msg = {{"role", "assistant"}, {"content", r.value("text", "")}};
  json calls = json::array();
  for (const json& c : r.value("tool_calls", json::array()))
    calls.push_back({{"id", c.value("id", "")}, {"type", "function"},
                     {"function", {{"name", c.value("name", "")}, {"arguments", c.value("arguments", json::object()).dump()}}}});
  if (!calls.empty()) msg["tool_calls"] = calls;
  const json usage = r.value("usage", json::object());
  return {{"id", "chatcmpl-scripted"}, {"object", "chat.completion"}, {"model", "scripted"},
          {"choices", json::array({{{"index", 0}, {"message", msg}, {"finish_reason", calls.empty() ? "stop" : "tool_calls"}}})},
          {"usage", {{"prompt_tokens", usage.value("input", 0)}, {"completion_tokens", usage.value("output", 0)}}}};
}

std::string openai_stream(const json& r) {
  auto chunk = [](const json& delta, const json& finish) {
    return json{{"id", "chatcmpl-scripted"}, {"object", "chat.completion.chunk"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
  };
  std::string out = sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  for (const std::string& piece : halves(r.value("text", "")))
    if (!piece.empty()) out += sse(chunk({{"content", piece}}, nullptr));
  const json calls = r.value("tool_calls", json::array());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    out += sse(chunk({{"tool_calls", json::array({{{"index", i}, {"id", c.value("id", "")}, {"type", "function"},
                                                   {"function", {{"name", c.value("name", "")}, {"arguments", ""}}}}})}},
                     nullptr));
    for (const std::string& piece : halves(c.value("arguments", json::object()).dump()))
      out += sse(chunk({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", piece}}}}})}}, nullptr));
  }
  out += sse(chunk(json::object(), calls.empty() ? "stop" : "tool_calls"));
  const json usage = r.value("usage", json::object());
  out += sse({{"id", "chatcmpl-scripted"}, {"object", "chat.completion.chunk"}, {"choices", json::array()},
              {"usage", {{"prompt_tokens", usage.value("input", 0)}, {"completion_tokens", usage.value("output", 0)}}}});
  return out + "data: [DONE]\n\n";
}

json anthropic_body(const json& r) {
  json content = json::array();
  if (!r.value("text", "").empty()) content.push_back({{"type", "text"}, {"text", r.value("text", "")}});
  const json calls = r.value("tool_calls", json::array());
  for (const json& c : calls)
    content.push_back({{"type", "tool_use"}, {"id", c.value("id", "")}, {"name", c.value("name", "")},
                       {"input", c.value("arguments", json::object())}});
  const json usage = r.value("usage", json::object());
  return {{"id", "msg_scripted"}, {"type", "message"}, {"role", "assistant"}, {"model", "scripted"},
          {"content", content}, {"stop_reason", calls.empty() ? "end_turn" : "tool_use"},
          {"usage", {{"input_tokens", usage.value("input", 0)}, {"output_tokens", usage.value("output", 0)}}}};
}

std::string anthropic_stream(const json& r) {
  const json usage = r.value("usage", json::object());
  std::string out = sse({{"type", "message_start"},
                         {"message", {{"id", "msg_scripted"}, {"type", "message"}, {"role", "assistant"},
                                      {"content", json::array()}, {"stop_reason", nullptr},
                                      {"usage", {{"input_tokens", usage.value("input", 0)}, {"output_tokens", 1}}}}}},
                        "message_start");
  int index = 0;
  if (const std::string text = r.value("text", ""); !text.empty()) {
    out += sse({{"type", "content_block_start"}, {"index", index}, {"content_block", {{"type", "text"}, {"text", ""}}}}, "content_block_start");
    for (const std::string& piece : halves(text))
      out += sse({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", piece}}}}, "content_block_delta");
    out += sse({{"type", "content_block_stop"}, {"index", index}}, "content_block_stop");
    ++index;
  }
  const json calls = r.value("tool_calls", json::array());
  for (const json& c : calls) {
    out += sse({{"type", "content_block_start"}, {"index", index},
                {"content_block", {{"type", "tool_use"}, {"id", c.value("id", "")}, {"name", c.value("name", "")}, {"input", json::object()}}}},
               "content_block_start");
    for (const std::string& piece : halves(c.value("arguments", json::object()).dump()))
      out += sse({{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}}, "content_block_delta");
    out += sse({{"type", "content_block_stop"}, {"index", index}}, "content_block_stop");
    ++index;
  }
  out += sse({{"type", "message_delta"}, {"delta", {{"stop_reason", calls.empty() ? "end_turn" : "tool_use"}}},
              {"usage", {{"output_tokens", usage.value("output", 0)}}}},
             "message_delta");
  out += sse({{"type", "message_stop"}}, "message_stop");
  return out;
}

}  // namespace

ScriptedLlmServer::ScriptedLlmServer(json script) : steps_(script.value("steps", json::array())), server_(std::make_unique<httplib::Server>()) {
  start();
}

ScriptedLlmServer::ScriptedLlmServer(json script, const std::string& cert, const std::string& key)
    : steps_(script.value("steps", json::array())), server_(std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str())), tls_(true) {
  if (!server_->is_valid()) throw std::runtime_error("scripted server: cannot load " + cert + " / " + key);
  start();
}

void ScriptedLlmServer::start() {
  auto route = [this](const std::string& api) {
    return [this, api](const httplib::Request& req, httplib::Response& res) {
      try {
        handle(api, &req, &res);
      } catch (const std::exception& e) {  // a script that does not fit the format: a failure, not a silent 500
        std::lock_guard lock(mu_);
        failures_.push_back(std::string("scripted server: ") + e.what());
        res.status = 500;
      }
    };
  };
  server_->Post(R"(.*/chat/completions)", route("openai"));
  server_->Post("/v1/messages", route("anthropic"));
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing before the accept loop runs (is_running() false), so a server destroyed right
  // after construction would leave the thread listening forever: wait for the loop.
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

ScriptedLlmServer::~ScriptedLlmServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<ReceivedRequest> ScriptedLlmServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}
std::vector<std::string> ScriptedLlmServer::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}
std::size_t ScriptedLlmServer::steps_left() const {
  std::lock_guard lock(mu_);
  return steps_.size() - next_;
}

void ScriptedLlmServer::handle(const std::string& api, const void* request, void* response) {
  const auto& req = *static_cast<const httplib::Request*>(request);
  auto& res = *static_cast<httplib::Response*>(response);
  std::lock_guard lock(mu_);
  ReceivedRequest rec{req.path, api, {}, json::parse(req.body, nullptr, false)};
  for (const auto& [k, v] : req.headers) rec.headers[lower(k)] = v;
  requests_.push_back(rec);
  const std::string where = "request " + std::to_string(requests_.size()) + " (" + api + "): ";
  if (rec.body.is_discarded()) {
    failures_.push_back(where + "body is not JSON");
    res.status = 400;
    return;
  }
  if (next_ >= steps_.size()) {
    failures_.push_back(where + "the script has no step left");
    res.status = 500;
    res.set_content(R"({"error":{"message":"script exhausted"}})", "application/json");
    return;
  }
  const json step = steps_[next_++];
  const json expect = step.value("expect", json::object());
  const bool stream = rec.body.value("stream", false);
  if (expect.contains("api") && expect["api"] != api) failures_.push_back(where + "expected api " + expect["api"].dump());
  if (expect.contains("stream") && expect["stream"].get<bool>() != stream) failures_.push_back(where + "stream is " + (stream ? "on" : "off"));
  if (expect.contains("tools")) {
    const auto want = expect["tools"].get<std::set<std::string>>();
    const auto got = tool_names(api, rec.body);
    if (want != got) failures_.push_back(where + "tools " + json(got).dump() + ", expected " + json(want).dump());
  }
  if (expect.contains("last") && expect["last"] != last_turn(api, rec.body))
    failures_.push_back(where + "last turn is '" + last_turn(api, rec.body) + "', expected " + expect["last"].dump());
  if (expect.contains("system_contains") && system_text(api, rec.body).find(expect["system_contains"].get<std::string>()) == std::string::npos)
    failures_.push_back(where + "system prompt lacks " + expect["system_contains"].dump());
  for (const json& s : expect.value("body_contains", json::array()))
    if (req.body.find(s.get<std::string>()) == std::string::npos) failures_.push_back(where + "body lacks " + s.dump());

  const json respond = step.value("respond", json::object());
  const json headers = respond.value("headers", json::object());  // a named object: items() must not outlive it
  for (const auto& [k, v] : headers.items()) res.set_header(k, v.get<std::string>());
  res.status = respond.value("status", 200);
  if (res.status != 200) {
    res.set_content(json{{"error", {{"message", respond.value("error", "scripted failure")}, {"type", "scripted"}}}}.dump(), "application/json");
    return;
  }
  // delay_s: the body comes that late (after the headers), outside the lock, so a client's timeout can be tested.
  const double delay_s = respond.value("delay_s", 0.0);
  if (!stream) {
    // "raw": this JSON as the body, whatever its shape (a malformed endpoint).
    const std::string body =
        respond.contains("raw") ? respond["raw"].dump() : (api == "openai" ? openai_body(respond) : anthropic_body(respond)).dump();
    res.set_content_provider(body.size(), "application/json", [body, delay_s](size_t offset, size_t, httplib::DataSink& sink) {
      if (offset == 0 && delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
      return sink.write(body.data() + offset, body.size() - offset);
    });
    return;
  }
  const std::string events = api == "openai" ? openai_stream(respond) : anthropic_stream(respond);
  // Chunked, one write per event, so the client sees the stream in pieces as it would from a real server.
  res.set_chunked_content_provider("text/event-stream", [events, delay_s](size_t, httplib::DataSink& sink) {
    if (delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    std::size_t start = 0;
    while (start < events.size()) {
      std::size_t end = events.find("\n\n", start);
      end = end == std::string::npos ? events.size() : end + 2;
      if (!sink.write(events.data() + start, end - start)) return false;
      start = end;
    }
    sink.done();
    return true;
  });
}

}  // namespace mi_test
