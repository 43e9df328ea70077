// The model the engine-runtime tests drive: the real emitted model (`metainfer emit`, build/emitted/<case>/model.h)
// of the checkpoint (the golden qwen3-tiny or llama-tiny, or the tokenizer-carrying synthesised Qwen3 tiny, told
// apart by config.json), behind the EngineModel interface with counters the tests read. The runtime (generation loop, CLI, bench) is written against the concept only, so
// it runs here exactly as in a generated engine. Deliberately without set_profiler (the "no profiler" path).
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "emitted/llama-tiny/model.h"
#include "emitted/qwen3-tiny/model.h"
#include "emitted/synth-qwen3-tiny/model.h"
#include "io/model_config.h"
#include "engine/model_interface.h"

namespace mi_test {

class TestModel {
  std::unique_ptr<emitted_qwen3_tiny::Model> qwen_;
  std::unique_ptr<emitted_llama_tiny::Model> llama_;
  std::unique_ptr<emitted_synth_qwen3_tiny::Model> synth_;
  // Runs f on whichever model this is (a test's dispatch; engines have one model type).
  template <class F>
  decltype(auto) with(F&& f) {
    return qwen_ ? f(*qwen_) : llama_ ? f(*llama_) : f(*synth_);
  }
  template <class F>
  decltype(auto) with(F&& f) const {
    return qwen_ ? f(std::as_const(*qwen_)) : llama_ ? f(std::as_const(*llama_)) : f(std::as_const(*synth_));
  }

 public:
  TestModel(const std::filesystem::path& dir, const mi::engine::RuntimeOptions& o) {
    const mi::io::ModelConfig c = mi::io::load_model_config(dir);  // a broken config.json fails here, named
    if (c.architecture == "LlamaForCausalLM") llama_ = std::make_unique<emitted_llama_tiny::Model>(dir, o);
    else if (c.vocab_size == emitted_synth_qwen3_tiny::Model::kVocab) synth_ = std::make_unique<emitted_synth_qwen3_tiny::Model>(dir, o);
    else qwen_ = std::make_unique<emitted_qwen3_tiny::Model>(dir, o);  // refuses any other checkpoint, naming the field
    ++constructed;
  }

  mi::engine::ModelFacts facts() const { return with([](const auto& m) { return m.facts(); }); }
  int vocab_size() const { return with([](const auto& m) { return m.vocab_size(); }); }
  int new_sequence() {
    const int seq = with([](auto& m) { return m.new_sequence(); });
    ++live_sequences;
    return seq;
  }
  void free_sequence(int seq) {
    with([seq](auto& m) { m.free_sequence(seq); });
    --live_sequences;
  }
  int sequence_length(int seq) const { return with([seq](const auto& m) { return m.sequence_length(seq); }); }
  void forward(int seq, const int32_t* ids, int n, float* logits, bool all_rows) {
    ++forward_calls;
    with([&](auto& m) { m.forward(seq, ids, n, logits, all_rows); });
  }
  void forward_batch(const int* seqs, const int32_t* ids, int B, float* logits) {
    forward_calls += B;  // one per sequence stepped, as if each stepped alone
    with([&](auto& m) { m.forward_batch(seqs, ids, B, logits); });
  }
  std::vector<int> eos_token_ids() const { return with([](const auto& m) { return m.eos_token_ids(); }); }

  // Counters the tests read (the CLI constructs its own model).
  static inline int constructed = 0;
  static inline int live_sequences = 0;
  static inline long forward_calls = 0;

};

static_assert(mi::engine::EngineModel<TestModel>);

}  // namespace mi_test
