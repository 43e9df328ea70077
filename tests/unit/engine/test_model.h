// A test stand-in for a generated engine::Model: satisfies mi::engine::EngineModel by wrapping the model team's
// dense forward assembly (tests/unit/model/dense_forward.h; dimensions from config.json at run time, scalar
// kernels). DenseModel holds one sequence, so this keeps max_batch of them: sequence i is model i.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../model/dense_forward.h"
#include "common/error.h"
#include "engine/model_interface.h"
#include "kernels/scalar/scalar.h"

namespace mi_test {

class TestModel {
 public:
  using Precise = DenseModel<mi::kernels::Scalar, mi::model::Numerics::precise>;
  using Fast = DenseModel<mi::kernels::Scalar, mi::model::Numerics::fast>;

  TestModel(const std::filesystem::path& dir, const mi::engine::RuntimeOptions& o) : fast_(o.fast) {
    if (o.max_batch <= 0) mi::fail("TestModel: max_batch must be positive");
    for (int i = 0; i < o.max_batch; ++i) {
      if (fast_)
        fast_models_.push_back(std::make_unique<Fast>(dir, o.max_context, o.threads));
      else
        precise_models_.push_back(std::make_unique<Precise>(dir, o.max_context, o.threads));
    }
    alive_.assign(std::size_t(o.max_batch), false);
    const mi::io::ModelConfig& c = config();
    facts_ = {c.architecture, c.model_type, "scalar", c.vocab_size, c.max_position_embeddings};
    ++constructed;
  }

  mi::engine::ModelFacts facts() const { return facts_; }
  int vocab_size() const { return facts_.vocab_size; }
  int new_sequence() {
    for (std::size_t i = 0; i < alive_.size(); ++i)
      if (!alive_[i]) {
        alive_[i] = true;
        ++live_sequences;
        return int(i);
      }
    mi::fail("TestModel: all ", alive_.size(), " sequences are alive");
  }
  void free_sequence(int seq) {
    check(seq);
    alive_[std::size_t(seq)] = false;
    --live_sequences;
    if (fast_) fast_models_[std::size_t(seq)]->reset();
    else precise_models_[std::size_t(seq)]->reset();
  }
  int sequence_length(int seq) const {
    check(seq);
    return fast_ ? fast_models_[std::size_t(seq)]->position() : precise_models_[std::size_t(seq)]->position();
  }
  void forward(int seq, const int32_t* ids, int n, float* logits, bool all_rows) {
    check(seq);
    ++forward_calls;
    if (fast_) fast_models_[std::size_t(seq)]->forward(ids, n, logits, all_rows);
    else precise_models_[std::size_t(seq)]->forward(ids, n, logits, all_rows);
  }
  // Each sequence alone, one after the other (the reference a generated model's batched step must match).
  void forward_batch(const int* seqs, const int32_t* ids, int B, float* logits) {
    if (B < 1 || std::size_t(B) > alive_.size()) mi::fail("TestModel: batch of ", B, " sequences, max_batch ", alive_.size());
    for (int b = 0; b < B; ++b) {
      check(seqs[b]);
      for (int c = 0; c < b; ++c)
        if (seqs[c] == seqs[b]) mi::fail("TestModel: sequence ", seqs[b], " appears twice");
    }
    for (int b = 0; b < B; ++b) forward(seqs[b], ids + b, 1, logits + std::size_t(b) * std::size_t(vocab_size()), false);
  }
  std::vector<int> eos_token_ids() const { return config().eos_token_ids; }

  // Counters the tests read (the CLI constructs its own model).
  static inline int constructed = 0;
  static inline int live_sequences = 0;
  static inline long forward_calls = 0;

 private:
  const mi::io::ModelConfig& config() const {
    return fast_ ? fast_models_.front()->config() : precise_models_.front()->config();
  }
  void check(int seq) const {
    if (seq < 0 || std::size_t(seq) >= alive_.size() || !alive_[std::size_t(seq)])
      mi::fail("TestModel: sequence ", seq, " is not alive");
  }

  bool fast_;
  std::vector<std::unique_ptr<Precise>> precise_models_;
  std::vector<std::unique_ptr<Fast>> fast_models_;
  std::vector<bool> alive_;
  mi::engine::ModelFacts facts_;
};

static_assert(mi::engine::EngineModel<TestModel>);

}  // namespace mi_test
