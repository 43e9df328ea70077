#include "server/openai_response.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "chat/python_text.h"

namespace mi::server {

// A byte-level BPE token can be part of a multi-byte character, invalid UTF-8 on
// its own: OpenAI writes such a token as "bytes:" and a \xNN escape per byte (the exact bytes stay in "bytes"),
// which also keeps distinct partial tokens distinct as completions' top_logprobs keys (replacing them with U+FFFD
// would merge them).
std::string token_string(const std::string& text) {
  if (chat::py::is_valid_utf8(text)) return text;  // the server depends on chat_template (ckb/contracts/server.toml)
  std::string out = "bytes:";
  char hex[5];
  for (const unsigned char c : text) {
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out;
}

namespace {

using Json = nlohmann::ordered_json;

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (const unsigned char c : s) b.push_back(int(c));
  return b;
}

Json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs, std::size_t text_offset) {
  if (endpoint == Endpoint::chat) {
    Json content = Json::array();
    for (const TokenLogprob& lp : logprobs) {
      Json top = Json::array();
      for (const TokenAlternative& a : lp.top)
        top.push_back({{"token", token_string(a.text)}, {"logprob", a.logprob}, {"bytes", bytes_of(a.text)}});
      content.push_back({{"token", token_string(lp.chosen.text)},
                         {"logprob", lp.chosen.logprob},
                         {"bytes", bytes_of(lp.chosen.text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
  std::size_t offset = text_offset;
  for (const TokenLogprob& lp : logprobs) {
    tokens.push_back(token_string(lp.chosen.text));
    token_logprobs.push_back(lp.chosen.logprob);
    Json top = Json::object();
    for (const TokenAlternative& a : lp.top) {
      const std::string key = token_string(a.text);
      if (!top.contains(key)) top[key] = a.logprob;  // distinct ids may still decode to the same text
    }
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += lp.chosen.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

Json envelope(const ResponseIdentity& who, const char* object) {
  return {{"id", who.id}, {"object", object}, {"created", who.created}, {"model", who.model}};
}

const char* chunk_object(Endpoint e) { return e == Endpoint::chat ? "chat.completion.chunk" : "text_completion"; }

}  // namespace

ResponseIdentity new_identity(Endpoint endpoint, const std::string& model) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx%08x", (unsigned long long)rng(), unsigned(rng() & 0xffffffffu));
  ResponseIdentity who;
  who.endpoint = endpoint;
  who.id = std::string(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + hex;
  who.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  who.model = model;
  return who;
}

Json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json completion_response(const ResponseIdentity& who, const std::string& text, const std::string& finish_reason,
                         const Usage& usage, const std::vector<TokenLogprob>& logprobs, bool with_logprobs,
                         const std::vector<int32_t>* token_ids) {
  const bool chat = who.endpoint == Endpoint::chat;
  Json r = envelope(who, chat ? "chat.completion" : "text_completion");
  Json choice = {{"index", 0}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  choice["logprobs"] = with_logprobs ? logprobs_json(who.endpoint, logprobs, 0) : Json(nullptr);
  choice["finish_reason"] = finish_reason;
  if (token_ids) choice["token_ids"] = *token_ids;
  r["choices"] = Json::array({choice});
  r["usage"] = usage_json(usage);
  return r;
}

Json stream_chunk(const ResponseIdentity& who, const std::string& text, const std::vector<TokenLogprob>& logprobs,
                  bool with_logprobs, const std::string& finish_reason, bool include_usage, std::size_t text_offset,
                  const std::vector<int32_t>* token_ids) {
  Json r = envelope(who, chunk_object(who.endpoint));
  Json choice = {{"index", 0}};
  if (who.endpoint == Endpoint::chat) choice["delta"] = text.empty() && !finish_reason.empty() ? Json::object() : Json{{"content", text}};
  else choice["text"] = text;
  choice["logprobs"] = with_logprobs ? logprobs_json(who.endpoint, logprobs, text_offset) : Json(nullptr);
  choice["finish_reason"] = finish_reason.empty() ? Json(nullptr) : Json(finish_reason);
  if (token_ids) choice["token_ids"] = *token_ids;
  r["choices"] = Json::array({choice});
  if (include_usage) r["usage"] = nullptr;
  return r;
}

Json chat_role_chunk(const ResponseIdentity& who, bool include_usage) {
  Json r = envelope(who, chunk_object(who.endpoint));
  r["choices"] = Json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  if (include_usage) r["usage"] = nullptr;
  return r;
}

Json usage_chunk(const ResponseIdentity& who, const Usage& usage) {
  Json r = envelope(who, chunk_object(who.endpoint));
  r["choices"] = Json::array();
  r["usage"] = usage_json(usage);
  return r;
}

}  // namespace mi::server
