// From a parsed API request to the work the serving loop runs: the model name checked, the prompt tokenized
// (completions text: tokenizer.json with its post-processor, as HF's tokenizer(text) does; chat: the checkpoint's
// chat template rendered with add_generation_prompt, then tokenized without special tokens, as
// apply_chat_template(tokenize=True) does), token ids checked against the vocabulary, and the token budget fixed
// up front so a request that cannot fit the context is refused before it is queued.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "runtime/sampler.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace mi::server {

struct PreparationContext {
  std::string model_name;                          // the id served under GET /v1/models
  const tok::Tokenizer* tokenizer = nullptr;       // null: the checkpoint has no tokenizer.json (token ids only)
  const chat::ChatTemplate* chat_template = nullptr;  // null: no chat template (chat completions refused)
  int vocab_size = 0;
  int max_context = 0;                             // prompt + generated tokens per request
};

struct PreparedRequest {
  std::vector<int32_t> prompt_ids;  // non-empty, every id < vocab_size
  int max_new_tokens = 0;           // >= 1; prompt + max_new_tokens <= max_context
  runtime::SamplingParams sampling;
  std::vector<std::string> stop;    // needs the tokenizer
  bool ignore_eos = false;
  bool return_token_ids = false;
  int logprobs = -1;
};

// ApiError: 404 for a model this server does not serve; 400 for a prompt that cannot be tokenized or rendered,
// is empty, holds an id outside the vocabulary, or does not fit the context with its max_tokens.
PreparedRequest prepare_request(const ApiRequest& request, const PreparationContext& context);

}  // namespace mi::server
