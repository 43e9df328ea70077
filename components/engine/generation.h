// The generation loop of the engine's command line: one request at a time on a model, prompt fed in prefill chunks,
// then one token per step until EOS, a stop string or max_new_tokens. Requests in flight together are the server's
// business (components/server/serving_loop.h with the scheduler); an engine whose constraints run one request at a
// time carries neither.
//
// Per step: the chunk is fed to model.forward, the last chunk's logits go to the request's sampler, the sampled id
// is streamed to `on_token` and its text (through the stream decoder and the stop-string filter) to `on_text`.
//
// The loop is compiled once (generation.cpp, in engine_core) against GenerationModel, the few calls it makes on a
// model; generate<M> adapts the generated Model to it, so the model's translation unit does not hold the loop.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "engine/model_interface.h"
#include "runtime/finish_reason.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace mi::engine {

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;      // fed as given (no BOS added here); not empty
  runtime::SamplingParams sampling;
  int max_new_tokens = 0;               // >= 0; 0 finishes at once with reason `length`
  std::vector<std::string> stop;        // needs a tokenizer
};

struct GenerationLimits {
  int max_context = 512;   // prompt + max_new_tokens must fit (the model's KV cache holds this many positions)
  int prefill_chunk = 0;   // prompt tokens per forward step; 0 = the whole prompt in one step
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
  std::function<void()> on_prompt_start;              // once, when an accepted request starts (where ttft_ms counts from)
  std::function<void(int32_t token)> on_token;        // every sampled token, in order
  std::function<void(std::string_view text)> on_text;  // final text as it becomes final
};

// The calls the generation loop makes on a model (EngineModel's, type-erased by generate<M>).
class GenerationModel {
 public:
  virtual ~GenerationModel() = default;
  virtual int vocab_size() const = 0;
  virtual std::vector<int> eos_token_ids() const = 0;
  virtual int new_sequence() = 0;
  virtual void free_sequence(int seq) = 0;
  // Appends n tokens to seq; the logits of the last one go to `logits` [vocab].
  virtual void forward(int seq, const int32_t* ids, int n, float* logits) = 0;
};

// Runs `request` to completion. The tokenizer may be null (no text, no stop strings). mi::Error naming the numbers
// for a request that cannot run (empty prompt, negative budget, prompt + max_new_tokens beyond max_context, stop
// strings without a tokenizer) before the model is touched; a model failure propagates after the sequence is freed.
GenerationResult generate_on(GenerationModel& model, const tok::Tokenizer* tokenizer, const GenerationLimits& limits,
                             const GenerationRequest& request, const GenerationCallbacks& callbacks = {});

// GenerationModel over a model of the EngineModel concept.
template <EngineModel M>
class GenerationModelOf final : public GenerationModel {
 public:
  explicit GenerationModelOf(M& model) : model_(model) {}
  int vocab_size() const override { return model_.vocab_size(); }
  std::vector<int> eos_token_ids() const override { return model_.eos_token_ids(); }
  int new_sequence() override { return model_.new_sequence(); }
  void free_sequence(int seq) override { model_.free_sequence(seq); }
  void forward(int seq, const int32_t* ids, int n, float* logits) override { model_.forward(seq, ids, n, logits, false); }

 private:
  M& model_;
};

// generate_on for a model of the EngineModel concept.
template <EngineModel M>
GenerationResult generate(M& model, const tok::Tokenizer* tokenizer, const GenerationLimits& limits,
                          const GenerationRequest& request, const GenerationCallbacks& callbacks = {}) {
  GenerationModelOf<M> erased(model);
  return generate_on(erased, tokenizer, limits, request, callbacks);
}

}  // namespace mi::engine
