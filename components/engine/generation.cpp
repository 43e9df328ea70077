// The generation loop of the engine's command line (engine/generation.h), compiled once into engine_core: it reaches
// the model only through GenerationModel, so it is the same object in every engine.
#include "engine/generation.h"

#include "engine/stop_text.h"
#include "tokenizer/stream_decoder.h"

namespace mi::engine {

GenerationResult generate_on(GenerationModel& model, const tok::Tokenizer* tokenizer, const GenerationLimits& limits,
                             const GenerationRequest& request, const GenerationCallbacks& callbacks) {
  using Clock = std::chrono::steady_clock;
  const long long prompt = (long long)request.prompt_ids.size();
  if (prompt == 0) fail("request rejected: the prompt is empty (at least one token is needed)");
  if (request.max_new_tokens < 0) fail("request rejected: max_new_tokens must be >= 0, got ", request.max_new_tokens);
  if (prompt + request.max_new_tokens > limits.max_context)
    fail("request rejected: prompt of ", prompt, " tokens + max_new_tokens ", request.max_new_tokens, " = ",
         prompt + request.max_new_tokens, " tokens exceeds max_context ", limits.max_context);
  if (limits.prefill_chunk < 0) fail("generate: prefill_chunk must be >= 0 (0 = whole prompt), got ", limits.prefill_chunk);
  if (!request.stop.empty() && !tokenizer) fail("stop strings need a tokenizer (the checkpoint has no tokenizer.json)");

  const auto start = Clock::now();  // ttft_ms counts from here, as a prompt-start mark does (after the checks)
  if (callbacks.on_prompt_start) callbacks.on_prompt_start();

  GenerationResult result;
  result.prompt_ids = request.prompt_ids;
  if (request.max_new_tokens == 0) {
    result.finish_reason = runtime::FinishReason::length;
    return result;
  }

  const int vocab = model.vocab_size();
  const std::vector<int> eos_ids = model.eos_token_ids();
  runtime::Sampler sampler(request.sampling, vocab);
  std::optional<tok::StreamDecoder> decoder;
  std::optional<StopTextFilter> stop;
  if (tokenizer) {
    decoder.emplace(*tokenizer, /*skip_special=*/true);
    stop.emplace(request.stop);
  }
  std::vector<int32_t> history = request.prompt_ids;  // prompt + output, for the repetition penalty
  history.reserve(history.size() + std::size_t(request.max_new_tokens));
  result.output_ids.reserve(std::size_t(request.max_new_tokens));
  std::vector<float> logits(static_cast<std::size_t>(vocab));  // [vocab] of the last fed position
  Clock::time_point first_token, last_token;

  const auto emit_text = [&](const std::string& text) {
    if (!text.empty() && callbacks.on_text) callbacks.on_text(text);
  };
  // Samples from `logits`; returns the reason to finish, or none.
  const auto sample = [&]() {
    const int32_t token = sampler.sample(logits, history);
    last_token = Clock::now();
    if (result.output_ids.empty()) first_token = last_token;
    history.push_back(token);
    result.output_ids.push_back(token);
    if (callbacks.on_token) callbacks.on_token(token);
    if (std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) return runtime::FinishReason::eos;
    // Ids the tokenizer does not know (embedding rows padded past its vocabulary) have no text.
    if (decoder && tokenizer->is_valid_id(token)) {
      emit_text(stop->push(decoder->feed(token)));
      if (stop->stopped()) return runtime::FinishReason::stop;
    }
    if (int(result.output_ids.size()) >= request.max_new_tokens) return runtime::FinishReason::length;
    return runtime::FinishReason::none;
  };

  const int sequence = model.new_sequence();
  try {
    const int chunk = limits.prefill_chunk > 0 ? limits.prefill_chunk : int(prompt);
    for (int first = 0; first < int(prompt); first += chunk) {
      const int count = std::min(chunk, int(prompt) - first);
      model.forward(sequence, request.prompt_ids.data() + first, count, logits.data());
    }
    runtime::FinishReason reason = sample();
    while (reason == runtime::FinishReason::none) {
      const int32_t last = result.output_ids.back();
      model.forward(sequence, &last, 1, logits.data());
      reason = sample();
    }
    result.finish_reason = reason;
  } catch (...) {
    model.free_sequence(sequence);
    throw;
  }
  model.free_sequence(sequence);

  if (decoder) {
    if (!stop->stopped()) emit_text(stop->push(decoder->finish()));
    if (stop->stopped()) result.finish_reason = runtime::FinishReason::stop;  // also when the flush completed one
    emit_text(stop->finish());
    result.text = stop->text();
  }
  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  result.ttft_ms = ms(first_token - start);
  result.tpot_ms = result.output_ids.size() > 1 ? ms(last_token - first_token) / double(result.output_ids.size() - 1) : 0.0;
  return result;
}

}  // namespace mi::engine
