#include "server/request_preparation.h"

namespace mi::server {

PreparedRequest prepare_request(const ApiRequest& r, const PreparationContext& c) {
  if (r.model != c.model_name)
    throw ApiError(404, "invalid_request_error",
                   "The model '" + r.model + "' does not exist; this server serves '" + c.model_name + "'", "model",
                   "model_not_found");
  PreparedRequest p;
  if (r.endpoint == Endpoint::chat) {
    if (!c.tokenizer) throw bad_field("messages", "chat completions need a tokenizer; the checkpoint has no tokenizer.json");
    if (!c.chat_template)
      throw bad_field("messages", "chat completions need a chat template; the checkpoint's tokenizer_config.json has none");
    std::string rendered;
    try {
      rendered = c.chat_template->render(r.messages, nullptr, true, r.chat_template_kwargs);
    } catch (const std::exception& e) {
      throw bad_field("messages", std::string("the chat template could not render them: ") + e.what());
    }
    try {
      p.prompt_ids = c.tokenizer->encode(rendered, false);  // the template wrote every special token itself
    } catch (const std::exception& e) {
      throw bad_field("messages", e.what());
    }
  } else if (r.prompt_is_ids) {
    p.prompt_ids = r.prompt_ids;
  } else {
    if (!c.tokenizer)
      throw bad_field("prompt", "a text prompt needs a tokenizer; the checkpoint has no tokenizer.json (send token ids)");
    try {
      p.prompt_ids = c.tokenizer->encode(r.prompt_text, true);
    } catch (const std::exception& e) {
      throw bad_field("prompt", e.what());
    }
  }
  const std::string prompt_param = r.endpoint == Endpoint::chat ? "messages" : "prompt";
  if (p.prompt_ids.empty()) throw bad_field(prompt_param, "the prompt is empty (it encodes to no tokens)");
  for (const int32_t id : p.prompt_ids)
    if (id >= c.vocab_size)
      throw bad_field(prompt_param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                        std::to_string(c.vocab_size) + ")");
  if (!r.stop.empty() && !c.tokenizer) throw bad_field("stop", "stop strings need a tokenizer; the checkpoint has none");

  const long long prompt = (long long)p.prompt_ids.size();
  const std::string& budget_param = r.max_tokens_param;
  if (r.max_tokens >= 0) {
    if (prompt + r.max_tokens > c.max_context)
      throw ApiError(400, "invalid_request_error",
                     "This model's maximum context length is " + std::to_string(c.max_context) +
                         " tokens. However, you requested " + std::to_string(prompt + r.max_tokens) + " tokens (" +
                         std::to_string(prompt) + " in the prompt, " + std::to_string(r.max_tokens) +
                         " for the completion). Please reduce the prompt or " + budget_param + ".",
                     budget_param, "context_length_exceeded");
    p.max_new_tokens = r.max_tokens;
  } else {
    if (prompt >= c.max_context)
      throw ApiError(400, "invalid_request_error",
                     "This model's maximum context length is " + std::to_string(c.max_context) +
                         " tokens. However, the prompt has " + std::to_string(prompt) +
                         " tokens, which leaves no room for a completion.",
                     prompt_param, "context_length_exceeded");
    p.max_new_tokens = int(c.max_context - prompt);
  }
  p.sampling = r.sampling;
  p.stop = r.stop;
  p.ignore_eos = r.ignore_eos;
  p.return_token_ids = r.return_token_ids;
  p.logprobs = r.logprobs;
  return p;
}

}  // namespace mi::server
