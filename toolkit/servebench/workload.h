// What serve-bench sends: the endpoint, the model, the prompt (text, or token ids for servers without a
// tokenizer), max_tokens, temperature 0, and streaming with a final usage chunk
// ("stream_options": {"include_usage": true}). Every request of a run has the same body.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "servebench/loopback_url.h"

namespace mi::servebench {

enum class Endpoint { completions, chat };

struct Workload {
  ServerUrl url;
  std::string model;
  Endpoint endpoint = Endpoint::completions;
  std::string prompt_text;     // used unless prompt_ids is non-empty
  int prompt_words = 0;        // > 0: prompt_text is text_prompt(prompt_words) (reported in the settings)
  std::vector<int> prompt_ids; // /v1/completions only: "prompt": [ids...]
  int max_tokens = 128;
  double timeout_s = 120;      // per request
};

const char* endpoint_name(Endpoint e);   // "completions" | "chat"
std::string endpoint_path(Endpoint e);   // "/v1/completions" | "/v1/chat/completions"
nlohmann::json request_body(const Workload& w);

}  // namespace mi::servebench
