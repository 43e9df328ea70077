#include "servebench/workload.h"

namespace mi::servebench {

const char* endpoint_name(Endpoint e) { return e == Endpoint::chat ? "chat" : "completions"; }

std::string endpoint_path(Endpoint e) { return e == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions"; }

nlohmann::json request_body(const Workload& w) {
  nlohmann::json body;
  body["model"] = w.model;
  if (w.endpoint == Endpoint::chat)
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", w.prompt_text}}});
  else if (!w.prompt_ids.empty())
    body["prompt"] = w.prompt_ids;
  else
    body["prompt"] = w.prompt_text;
  body["max_tokens"] = w.max_tokens;
  body["temperature"] = 0;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body;
}

}  // namespace mi::servebench
