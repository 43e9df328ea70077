#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <random>

namespace mi::server {
namespace {

using Json = nlohmann::ordered_json;

const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

// Field readers: absent or null means "not given" (the default stays), as OpenAI treats null.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}

  const Json* get(const char* name) const {
    const auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }

  bool read_bool(const char* name, bool& out) const {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_boolean()) throw bad_field(name, std::string("expected a boolean, got ") + type_name(*v));
    out = v->get<bool>();
    return true;
  }

  bool read_number(const char* name, double& out, double lo, double hi, bool lo_open, bool hi_open) const {
    const Json* v = get(name);
    if (!v) return false;
    if (!v->is_number()) throw bad_field(name, std::string("expected a number, got ") + type_name(*v));
    // Checked as the float the sampler will hold: 1e300 is finite as a double but inf as a float, 1e-50 is > 0
    // but rounds to 0, 0.99999999999 rounds to 1.
    const double d = v->get<double>();
    const double x = std::fabs(d) <= double(std::numeric_limits<float>::max()) ? double(float(d))
                                                                             : std::numeric_limits<double>::infinity();
    const bool below = lo_open ? !(x > lo) : !(x >= lo);
    const bool above = hi_open ? !(x < hi) : !(x <= hi);
    if (!std::isfinite(x) || below || above)
      throw bad_field(name, "expected a number in " + std::string(lo_open ? "(" : "[") + format(lo) + ", " +
                                format(hi) + (hi_open ? ")" : "]") + ", got " + v->dump());
    out = x;
    return true;
  }

  bool read_int(const char* name, long long& out, long long lo, long long hi) const {
    const Json* v = get(name);
    if (!v) return false;
    // JSON has one number type: 3.0 is accepted as 3, 3.5 is not an integer.
    if (v->is_number_float()) {
      const double x = v->get<double>();
      if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 9.0e15)
        throw bad_field(name, "expected an integer, got " + v->dump());
      out = (long long)x;
    } else if (v->is_number_unsigned()) {
      const auto u = v->get<unsigned long long>();
      out = u > (unsigned long long)std::numeric_limits<long long>::max() ? std::numeric_limits<long long>::max()
                                                                          : (long long)u;
    } else if (v->is_number_integer()) {
      out = v->get<long long>();
    } else {
      throw bad_field(name, std::string("expected an integer, got ") + type_name(*v));
    }
    if (out < lo || out > hi)
      throw bad_field(name, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                v->dump());
    return true;
  }

 private:
  static std::string format(double x) {
    if (x == std::numeric_limits<double>::infinity()) return "inf";
    Json j = x;
    return j.dump();
  }
  const Json& body_;
};

void refuse_unsupported(const Fields& f) {
  long long n = 1;
  if (f.read_int("n", n, 1, 128) && n != 1) throw bad_field("n", "only n = 1 is supported, got " + std::to_string(n));
  long long best_of = 1;
  if (f.read_int("best_of", best_of, 1, 128) && best_of != 1)
    throw bad_field("best_of", "only best_of = 1 is supported");
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    double x = 0;
    if (f.read_number(name, x, -2.0, 2.0, false, false) && x != 0.0)
      throw bad_field(name, "not supported (only 0); use repetition_penalty");
  }
  if (const Json* v = f.get("logit_bias"); v && !(v->is_object() && v->empty()))
    throw bad_field("logit_bias", "not supported");
  if (const Json* v = f.get("tools"); v && !(v->is_array() && v->empty()))
    throw bad_field("tools", "tool calling is not supported by this engine");
  if (const Json* v = f.get("response_format")) {
    const auto t = v->is_object() ? v->find("type") : v->end();
    if (!v->is_object() || t == v->end() || !t->is_string() || t->get<std::string>() != "text")
      throw bad_field("response_format", "only {\"type\": \"text\"} is supported");
  }
  if (const Json* v = f.get("suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
    throw bad_field("suffix", "not supported");
}

std::vector<int32_t> token_ids(const Json& array, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    const Json& v = array[i];
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > std::numeric_limits<int32_t>::max())
      throw bad_field(param, "element " + std::to_string(i) + ": expected a token id (an integer >= 0), got " + v.dump());
    ids.push_back(int32_t(v.get<long long>()));
  }
  return ids;
}

void read_prompt(const Fields& f, ApiRequest& r) {
  const Json* p = f.get("prompt");
  if (!p) throw bad_field("prompt", "required (a string or an array of token ids)");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array() || p->empty())
    throw bad_field("prompt", std::string("expected a string or a non-empty array, got ") + type_name(*p));
  const Json& first = (*p)[0];
  if (first.is_number()) {
    r.prompt_ids = token_ids(*p, "prompt");
    r.prompt_is_ids = true;
    return;
  }
  // A batch of prompts: only a batch of one is served per request.
  if (p->size() != 1) throw bad_field("prompt", "only one prompt per request is supported, got " + std::to_string(p->size()));
  if (first.is_string()) {
    r.prompt_text = first.get<std::string>();
  } else if (first.is_array() && !first.empty()) {
    r.prompt_ids = token_ids(first, "prompt");
    r.prompt_is_ids = true;
  } else {
    throw bad_field("prompt", std::string("expected a string or token ids, got an array of ") + type_name(first));
  }
}

// content: a string, null, or an array of {"type": "text", "text": ...} parts (joined with nothing between them).
Json message_content(const Json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array())
    throw bad_field(param, std::string("expected a string, null or an array of text parts, got ") + type_name(content));
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw bad_field(where, "expected a content part object");
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) throw bad_field(where + ".type", "required (a string)");
    if (type->get<std::string>() != "text")
      throw bad_field(where + ".type", "only text parts are supported, got '" + type->get<std::string>() + "'");
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw bad_field(where + ".text", "required (a string)");
    text += t->get<std::string>();
  }
  return text;
}

void read_messages(const Fields& f, ApiRequest& r) {
  const Json* m = f.get("messages");
  if (!m) throw bad_field("messages", "required (a non-empty array of messages)");
  if (!m->is_array() || m->empty())
    throw bad_field("messages", std::string("expected a non-empty array, got ") + (m->is_array() ? "an empty array" : type_name(*m)));
  r.messages = Json::array();
  for (std::size_t i = 0; i < m->size(); ++i) {
    const Json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw bad_field(where, std::string("expected an object, got ") + type_name(msg));
    const auto role = msg.find("role");
    if (role == msg.end() || !role->is_string() || role->get<std::string>().empty())
      throw bad_field(where + ".role", "required (a non-empty string such as \"system\", \"user\", \"assistant\")");
    Json out = msg;  // keep every key (templates may read name, tool_call_id, ...)
    const auto content = msg.find("content");
    out["content"] = content == msg.end() ? Json(nullptr) : message_content(*content, where + ".content");
    r.messages.push_back(std::move(out));
  }
  if (const Json* kw = f.get("chat_template_kwargs")) {
    if (!kw->is_object()) throw bad_field("chat_template_kwargs", std::string("expected an object, got ") + type_name(*kw));
    r.chat_template_kwargs = *kw;
  }
}

void read_stop(const Fields& f, ApiRequest& r) {
  const Json* s = f.get("stop");
  if (!s) return;
  if (s->is_string()) {
    if (s->get<std::string>().empty()) throw bad_field("stop", "a stop string must not be empty");
    r.stop = {s->get<std::string>()};
    return;
  }
  if (!s->is_array()) throw bad_field("stop", std::string("expected a string or an array of strings, got ") + type_name(*s));
  if (s->size() > 4) throw bad_field("stop", "at most 4 stop strings, got " + std::to_string(s->size()));
  for (std::size_t i = 0; i < s->size(); ++i) {
    const Json& v = (*s)[i];
    if (!v.is_string() || v.get<std::string>().empty())
      throw bad_field("stop", "element " + std::to_string(i) + ": expected a non-empty string, got " + v.dump());
    r.stop.push_back(v.get<std::string>());
  }
}

}  // namespace

ApiRequest parse_api_request(Endpoint endpoint, std::string_view body) {
  Json j;
  try {
    // The parser's callback sees each value's depth before it is built; nothing deeper than kMaxJsonDepth is kept.
    j = Json::parse(body, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxJsonDepth)
        throw ApiError(400, "invalid_request_error",
                       "the body nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    throw ApiError(400, "invalid_request_error", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "invalid_request_error", std::string("the body must be a JSON object, got ") + type_name(j));
  const Fields f(j);
  ApiRequest r;
  r.endpoint = endpoint;

  const Json* model = f.get("model");
  if (!model) throw bad_field("model", "required (a model id from GET /v1/models)");
  if (!model->is_string()) throw bad_field("model", std::string("expected a string, got ") + type_name(*model));
  r.model = model->get<std::string>();

  refuse_unsupported(f);
  if (endpoint == Endpoint::completions) {
    read_prompt(f, r);
    bool echo = false;
    if (f.read_bool("echo", echo) && echo) throw bad_field("echo", "not supported (only false)");
    long long lp = 0;
    if (f.read_int("logprobs", lp, 0, kMaxLogprobs)) r.logprobs = int(lp);
  } else {
    read_messages(f, r);
    bool lp = false;
    f.read_bool("logprobs", lp);
    long long top = 0;
    const bool top_given = f.read_int("top_logprobs", top, 0, kMaxLogprobs);
    if (top_given && !lp) throw bad_field("top_logprobs", "needs \"logprobs\": true");
    if (lp) r.logprobs = int(top);
  }

  long long max_tokens = 0;
  if (endpoint == Endpoint::chat && f.read_int("max_completion_tokens", max_tokens, 1, std::numeric_limits<int>::max())) {
    r.max_tokens = int(max_tokens);
    r.max_tokens_param = "max_completion_tokens";
  } else if (f.read_int("max_tokens", max_tokens, 1, std::numeric_limits<int>::max()))
    r.max_tokens = int(max_tokens);

  double x = 0;
  r.sampling.temperature = 1.0f;  // OpenAI's default
  if (f.read_number("temperature", x, 0.0, 2.0, false, false)) r.sampling.temperature = float(x);
  if (f.read_number("top_p", x, 0.0, 1.0, true, false)) r.sampling.top_p = float(x);
  if (f.read_number("min_p", x, 0.0, 1.0, false, true)) r.sampling.min_p = float(x);
  if (f.read_number("repetition_penalty", x, 0.0, std::numeric_limits<double>::infinity(), true, true))
    r.sampling.repetition_penalty = float(x);
  long long k = 0;
  if (f.read_int("top_k", k, -1, std::numeric_limits<int>::max())) r.sampling.top_k = k < 0 ? 0 : int(k);
  long long seed = 0;
  if (f.read_int("seed", seed, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max()))
    r.sampling.seed = uint64_t(seed);
  else
    r.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();  // as OpenAI: no seed, no repeat

  read_stop(f, r);
  f.read_bool("ignore_eos", r.ignore_eos);
  f.read_bool("return_token_ids", r.return_token_ids);
  f.read_bool("stream", r.stream);
  if (const Json* so = f.get("stream_options")) {
    if (!r.stream) throw bad_field("stream_options", "only allowed when \"stream\" is true");
    if (!so->is_object()) throw bad_field("stream_options", std::string("expected an object, got ") + type_name(*so));
    Fields(*so).read_bool("include_usage", r.include_usage);
  }
  if (const Json* u = f.get("user"); u && !u->is_string())
    throw bad_field("user", std::string("expected a string, got ") + type_name(*u));
  return r;
}

}  // namespace mi::server
