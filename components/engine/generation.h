// The generation loop: runs requests to completion on a model, planning every step with the Scheduler,
// sampling with one Sampler per request, detokenizing incrementally and watching for stop strings.
//
// Per step: requests admitted by the scheduler get a model sequence; every prefill chunk is fed to
// Model::forward (the last chunk's logits give the first token); every decoding request feeds its last token and
// samples the next. A sampled token that is not an EOS id is decoded (StreamDecoder, special tokens skipped) and
// its text passed through the request's StopTextFilter; finished requests give their sequence back to the model.
//
// Timing (std::chrono::steady_clock): ttft_ms = from the start of generate() to the first token sampled;
// tpot_ms = mean time per token after the first, (last token time - first token time) / (tokens - 1).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "engine/model_interface.h"
#include "engine/stop_text.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mi::engine {

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;      // fed as given (no BOS added here)
  runtime::SamplingParams sampling;
  int max_new_tokens = 0;
  std::vector<std::string> stop;        // needs a tokenizer
};

struct GenerationResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;      // every sampled token, including a final EOS id
  std::string text;                     // decoded output (no special tokens, cut before a stop string); "" without tokenizer
  runtime::FinishReason finish_reason = runtime::FinishReason::none;
  double ttft_ms = 0;
  double tpot_ms = 0;
};

struct GenerationCallbacks {
  std::function<void(std::size_t request, int32_t token)> on_token;        // every sampled token, in order
  std::function<void(std::size_t request, std::string_view text)> on_text;  // final text as it becomes final
};

// Runs all `requests` (indices into the returned vector and the callbacks' `request`). The tokenizer may be null
// (no text, no stop strings). mi::Error for a request the scheduler rejects or a model failure; on an error every
// model sequence this call took is freed before the error propagates.
template <EngineModel M>
std::vector<GenerationResult> generate(M& model, const tok::Tokenizer* tokenizer, const runtime::SchedulerLimits& limits,
                                       const std::vector<GenerationRequest>& requests,
                                       const GenerationCallbacks& callbacks = {}) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int vocab = model.vocab_size();

  struct Live {
    std::size_t index = 0;
    int sequence = -1;
    std::unique_ptr<runtime::Sampler> sampler;
    std::unique_ptr<tok::StreamDecoder> decoder;
    std::unique_ptr<StopTextFilter> stop;
    std::vector<int32_t> history;  // prompt + output, for the repetition penalty
    std::vector<int32_t> eos;
    Clock::time_point first_token, last_token;
  };

  runtime::Scheduler scheduler(limits);
  std::vector<GenerationResult> results(requests.size());
  std::vector<Live> live(requests.size());
  std::vector<std::size_t> index_of;  // scheduler request id -> request index
  const std::vector<int> eos_ids = model.eos_token_ids();
  const std::vector<int32_t> eos(eos_ids.begin(), eos_ids.end());

  for (std::size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    if (!r.stop.empty() && !tokenizer) fail("stop strings need a tokenizer (the checkpoint has no tokenizer.json)");
    Live& l = live[i];
    l.index = i;
    l.sampler = std::make_unique<runtime::Sampler>(r.sampling, vocab);
    if (tokenizer) {
      l.decoder = std::make_unique<tok::StreamDecoder>(*tokenizer, /*skip_special=*/true);
      l.stop = std::make_unique<StopTextFilter>(r.stop);
    }
    l.history.reserve(r.prompt_ids.size() + std::size_t(std::max(r.max_new_tokens, 0)));
    l.history = r.prompt_ids;
    l.eos = eos;
    results[i].prompt_ids = r.prompt_ids;
    const int id = scheduler.submit({r.prompt_ids, r.max_new_tokens, eos});
    if (std::size_t(id) != index_of.size()) fail("generate: scheduler ids are not sequential");
    index_of.push_back(i);
  }

  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const auto emit_text = [&](std::size_t i, const std::string& text) {
    if (!text.empty() && callbacks.on_text) callbacks.on_text(i, text);
  };
  const auto finish_request = [&](int id) {
    const runtime::RequestStatus& s = scheduler.status(id);
    const std::size_t i = index_of[std::size_t(id)];
    Live& l = live[i];
    if (l.sequence >= 0) model.free_sequence(l.sequence);
    l.sequence = -1;
    GenerationResult& r = results[i];
    r.output_ids = s.output_ids;
    r.finish_reason = s.finish_reason;
    if (l.decoder) {
      if (!l.stop->stopped()) emit_text(i, l.stop->push(l.decoder->finish()));
      if (l.stop->stopped()) r.finish_reason = runtime::FinishReason::stop;  // also when the flush completed one
      emit_text(i, l.stop->finish());
      r.text = l.stop->text();
    }
    if (!s.output_ids.empty()) {
      r.ttft_ms = ms(l.first_token - start);
      r.tpot_ms = s.output_ids.size() > 1 ? ms(l.last_token - l.first_token) / double(s.output_ids.size() - 1) : 0.0;
    }
  };

  std::vector<float> logits(static_cast<std::size_t>(vocab));  // [vocab] of the token being sampled
  std::vector<runtime::TokenResult> step_tokens;
  step_tokens.reserve(std::size_t(limits.max_batch));

  const auto sample = [&](int id) {
    Live& l = live[index_of[std::size_t(id)]];
    const int32_t token = l.sampler->sample(logits, l.history);
    const auto now = Clock::now();
    if (scheduler.status(id).output_ids.empty()) l.first_token = now;
    l.last_token = now;
    l.history.push_back(token);
    if (callbacks.on_token) callbacks.on_token(l.index, token);
    bool stop = false;
    const bool is_eos = std::find(l.eos.begin(), l.eos.end(), token) != l.eos.end();
    // Ids the tokenizer does not know (embedding rows padded past its vocabulary) have no text.
    if (l.decoder && !is_eos && tokenizer->is_valid_id(token)) {
      emit_text(l.index, l.stop->push(l.decoder->feed(token)));
      stop = l.stop->stopped();
    }
    step_tokens.push_back({id, token, stop});
  };

  try {
    for (std::size_t i = 0; i < requests.size(); ++i)  // requests with nothing to generate are done already
      if (scheduler.status(int(i)).state == runtime::RequestState::finished) finish_request(int(i));
    while (scheduler.has_work()) {
      const runtime::StepPlan& plan = scheduler.next_step();
      for (const int id : plan.admitted) live[index_of[std::size_t(id)]].sequence = model.new_sequence();
      step_tokens.clear();
      for (const runtime::StepPlan::Prefill& p : plan.prefills) {
        const Live& l = live[index_of[std::size_t(p.request)]];
        model.forward(l.sequence, scheduler.status(p.request).prompt_ids.data() + p.first, p.count, logits.data(),
                      false);
        if (p.last) sample(p.request);
      }
      for (const int id : plan.decodes) {
        const Live& l = live[index_of[std::size_t(id)]];
        const int32_t last = scheduler.status(id).output_ids.back();
        model.forward(l.sequence, &last, 1, logits.data(), false);
        sample(id);
      }
      for (const int id : scheduler.complete_step(step_tokens)) finish_request(id);
    }
  } catch (...) {
    for (Live& l : live)
      if (l.sequence >= 0) {
        model.free_sequence(l.sequence);
        l.sequence = -1;
      }
    throw;
  }
  return results;
}

}  // namespace mi::engine
