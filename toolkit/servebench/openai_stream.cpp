#include "servebench/openai_stream.h"

#include <nlohmann/json.hpp>

namespace mi::servebench {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string shorten(std::string_view s, std::size_t n = 300) {
  std::string out(s.substr(0, n));
  if (s.size() > n) out += "...";
  return out;
}

// The message of an OpenAI error object ({"error": {"message": ...}} or {"object": "error", "message": ...}).
std::string error_message(const nlohmann::json& chunk) {
  const nlohmann::json& e = chunk.contains("error") ? chunk["error"] : chunk;
  if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
  if (e.is_string()) return e.get<std::string>();
  return shorten(e.dump());
}

bool non_empty_string(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

bool carries_content(const nlohmann::json& chunk) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return false;
  const nlohmann::json& c = (*choices)[0];
  if (non_empty_string(c, "text")) return true;
  const auto delta = c.find("delta");
  return delta != c.end() && delta->is_object() &&
         (non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content") || non_empty_string(*delta, "reasoning"));
}

}  // namespace

OpenAiStream::OpenAiStream(Clock::time_point sent)
    : sent_(sent), parser_([this](std::string_view data) { return event(data); }) {}

bool OpenAiStream::feed(std::string_view bytes, Clock::time_point now) {
  if (failed()) return false;
  now_ = now;
  if (!parser_.feed(bytes) && !failed()) fail("malformed SSE: " + parser_.error());
  return !failed();
}

void OpenAiStream::fail(const std::string& message) {
  if (result_.error.empty()) result_.error = message.empty() ? "unknown error" : message;
}

bool OpenAiStream::event(std::string_view data) {
  if (result_.done) return true;  // anything after [DONE] is ignored
  if (data == "[DONE]") {
    result_.done = true;
    return true;
  }
  nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    fail("malformed SSE: a data event is not a JSON object: " + shorten(data, 200));
    return false;
  }
  if ((chunk.contains("error") && !chunk["error"].is_null()) || chunk.value("object", "") == "error") {
    fail("error in stream: " + error_message(chunk));
    return false;
  }
  if (carries_content(chunk)) {
    if (result_.content_chunks == 0)
      result_.ttft_s = seconds(now_ - sent_);
    else
      result_.itl_s.push_back(seconds(now_ - last_content_));
    last_content_ = now_;
    result_.latency_s = seconds(now_ - sent_);
    ++result_.content_chunks;
  }
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    if (usage->contains("completion_tokens") && (*usage)["completion_tokens"].is_number_integer())
      result_.usage_completion_tokens = (*usage)["completion_tokens"].get<int>();
    if (usage->contains("prompt_tokens") && (*usage)["prompt_tokens"].is_number_integer())
      result_.usage_prompt_tokens = (*usage)["prompt_tokens"].get<int>();
  }
  return true;
}

RequestResult OpenAiStream::finish() {
  if (!failed() && !parser_.finish() && !failed()) fail("malformed SSE: " + parser_.error());
  if (!failed() && !result_.done) fail("malformed SSE: the stream ended without 'data: [DONE]'");
  if (!failed() && result_.content_chunks == 0) fail("the stream carried no content (no non-empty text or delta.content)");
  result_.ok = !failed();
  return result_;
}

}  // namespace mi::servebench
