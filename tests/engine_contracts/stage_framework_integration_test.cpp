// Test contract, stage framework_integration (ckb/contracts/weight_loading, model_config, kv_cache,
// model_executor): the generated Model on the real checkpoint given by METAINFER_STAGE_MODEL.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine_config.h"
#include "model.h"

namespace {
using namespace engine::config;

std::string checkpoint() {
  const char* dir = std::getenv("METAINFER_STAGE_MODEL");
  if (!dir || !*dir) ADD_FAILURE() << "METAINFER_STAGE_MODEL must name the checkpoint (metainfer verify sets it)";
  return dir ? dir : "";
}

mi::engine::RuntimeOptions options(int max_context = 64) {
  mi::engine::RuntimeOptions o;
  const char* t = std::getenv("METAINFER_STAGE_THREADS");
  o.threads = t ? std::max(1, std::atoi(t)) : kThreads;
  o.max_batch = std::max(2, kMaxBatch);
  o.max_context = std::min(max_context, kMaxPositionEmbeddings);
  o.kv_block_size = std::min(kKvBlockSize, o.max_context);
  return o;
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> ids(static_cast<std::size_t>(n));
  uint64_t x = 12345;
  for (auto& id : ids) {
    x = (1103515245 * x + 12345) % 2147483648ull;
    id = int32_t(1 + x % uint64_t(kVocabSize - 1));
  }
  return ids;
}

TEST(FrameworkIntegration, LoadsTheCheckpointAndChecksEveryRequiredWeight) {
  engine::Model model(checkpoint(), options());
  EXPECT_EQ(model.vocab_size(), kVocabSize);
  EXPECT_FALSE(engine::Model::required_weights().empty());
  EXPECT_EQ(model.facts().architecture, std::string(kArchitecture));
}

// Prefill then decode must equal one forward over the whole sequence (failure mode BUG-004-1).
TEST(FrameworkIntegration, PrefillThenDecodeEqualsFullForward) {
  engine::Model model(checkpoint(), options());
  const auto ids = prompt(9);
  const int V = kVocabSize;
  std::vector<float> full(std::size_t(ids.size()) * V), step(static_cast<std::size_t>(V));
  const int a = model.new_sequence();
  model.forward(a, ids.data(), int(ids.size()), full.data(), true);
  EXPECT_EQ(model.sequence_length(a), int(ids.size()));
  const int b = model.new_sequence();
  model.forward(b, ids.data(), int(ids.size()) - 1, step.data(), false);
  model.forward(b, ids.data() + ids.size() - 1, 1, step.data(), false);
  EXPECT_EQ(model.sequence_length(b), int(ids.size()));
  double max_diff = 0;
  for (int i = 0; i < V; ++i) max_diff = std::max(max_diff, double(std::fabs(step[std::size_t(i)] - full[(ids.size() - 1) * V + i])));
  EXPECT_LE(max_diff, 1e-4);
  model.free_sequence(a);
  model.free_sequence(b);
}

TEST(FrameworkIntegration, IsDeterministicAndSequencesAreIndependent) {
  engine::Model model(checkpoint(), options());
  const auto ids = prompt(5);
  std::vector<float> first(static_cast<std::size_t>(kVocabSize)), second(first.size());
  const int a = model.new_sequence();
  model.forward(a, ids.data(), int(ids.size()), first.data(), false);
  const int b = model.new_sequence();  // a second sequence alive beside the first
  model.forward(b, ids.data(), int(ids.size()), second.data(), false);
  EXPECT_EQ(first, second);
}

TEST(FrameworkIntegration, RejectsBadInputBeforeCompute) {
  engine::Model model(checkpoint(), options(32));
  const int seq = model.new_sequence();
  std::vector<float> logits(static_cast<std::size_t>(kVocabSize));
  const int32_t bad = kVocabSize;
  EXPECT_THROW(model.forward(seq, &bad, 1, logits.data(), false), mi::Error);
  const auto too_long = prompt(33);
  EXPECT_THROW(model.forward(seq, too_long.data(), int(too_long.size()), logits.data(), false), mi::Error);
  EXPECT_THROW(engine::Model("/nonexistent/checkpoint", options()), mi::Error);
}

// One batched decode step over sequences of different lengths gives each row the logits that sequence gets when it
// steps alone. The batched step runs the linear layers as one matmul over B rows where the lone step uses a matvec;
// both accumulate in f32 but in possibly different orders, so rows may differ by f32 rounding, not more: 1e-4
// absolute, the bound prefill-then-decode vs one forward has above. Attention, rotary and norms are per row and the
// same code, so a wrong position, sequence or cache row would differ by O(1).
// (A template over the model so that an engine without the batched path, which never instantiates it, compiles.)
template <class Model>
void batched_decode_equals_each_sequence_alone() {
  mi::engine::RuntimeOptions o = options();
  o.max_batch = 3;
  Model batched(checkpoint(), o), alone(checkpoint(), o);
  const int V = kVocabSize;
  const std::vector<int> lengths = {7, 2, 12};
  const auto ids = prompt(16);
  std::vector<int> seqs, alone_seqs;
  std::vector<float> logits(static_cast<std::size_t>(V));
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    seqs.push_back(batched.new_sequence());
    alone_seqs.push_back(alone.new_sequence());
    batched.forward(seqs[b], ids.data() + b, lengths[b], logits.data(), false);
    alone.forward(alone_seqs[b], ids.data() + b, lengths[b], logits.data(), false);
  }
  // Two steps, in a row order that differs from the allocation order.
  const std::vector<int> order = {2, 0, 1};
  for (int step = 0; step < 2; ++step) {
    std::vector<int> step_seqs;
    std::vector<int32_t> step_ids;
    for (int b : order) {
      step_seqs.push_back(seqs[std::size_t(b)]);
      step_ids.push_back(ids[std::size_t(b + 3 * step + 1)]);
    }
    std::vector<float> rows(std::size_t(order.size()) * V);
    batched.forward_batch(step_seqs.data(), step_ids.data(), int(order.size()), rows.data());
    for (std::size_t r = 0; r < order.size(); ++r) {
      const int b = order[r];
      alone.forward(alone_seqs[std::size_t(b)], &step_ids[r], 1, logits.data(), false);
      EXPECT_EQ(batched.sequence_length(seqs[std::size_t(b)]), lengths[std::size_t(b)] + step + 1);
      double max_diff = 0;
      for (int i = 0; i < V; ++i)
        max_diff = std::max(max_diff, double(std::fabs(rows[r * V + std::size_t(i)] - logits[std::size_t(i)])));
      EXPECT_LE(max_diff, 1e-4) << "step " << step << " row " << r << " (sequence of " << lengths[std::size_t(b)] << " tokens)";
    }
  }
}

template <class Model>
void batched_decode_rejects_bad_batches_before_compute() {
  mi::engine::RuntimeOptions o = options(16);
  o.max_batch = 2;
  Model model(checkpoint(), o);
  const int a = model.new_sequence(), b = model.new_sequence();
  const auto ids = prompt(16);
  std::vector<float> logits(std::size_t(3) * kVocabSize);
  model.forward(a, ids.data(), 3, logits.data(), false);
  model.forward(b, ids.data(), 15, logits.data(), false);
  const int32_t two[2] = {ids[0], ids[1]}, three[3] = {ids[0], ids[1], ids[2]};
  const int dup[2] = {a, a}, dead[2] = {a, 7}, trio[3] = {a, b, a};
  auto rejects = [&](const int* s, const int32_t* t, int n, const std::string& expect) {
    try {
      model.forward_batch(s, t, n, logits.data());
      ADD_FAILURE() << "accepted a batch that should fail with '" << expect << "'";
    } catch (const mi::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  rejects(dup, two, 2, "appears twice");
  rejects(dead, two, 2, "not allocated");
  rejects(trio, three, 3, "max_batch");
  rejects(dup, two, 0, "at least one");
  const int32_t bad_id[2] = {ids[0], kVocabSize};
  const int ok[2] = {a, b};
  rejects(ok, bad_id, 2, "vocabulary");
  // Nothing changed: both sequences still take a valid step, then b (15 + 1 = 16 tokens) is full.
  EXPECT_EQ(model.sequence_length(a), 3);
  EXPECT_EQ(model.sequence_length(b), 15);
  model.forward_batch(ok, two, 2, logits.data());
  EXPECT_EQ(model.sequence_length(a), 4);
  EXPECT_EQ(model.sequence_length(b), 16);
  rejects(ok, two, 2, "is full");
  EXPECT_EQ(model.sequence_length(a), 4);
}

// The batched decode path exists exactly when the constraints run more than one sequence at once (runtime.max_batch):
// what the constraints do not ask for is not compiled in.
constexpr bool kBatched = mi::engine::BatchedEngineModel<engine::Model>;

TEST(FrameworkIntegration, BatchedPathIsCompiledExactlyWhenMaxBatchAsksForIt) { EXPECT_EQ(kBatched, kMaxBatch >= 2); }

TEST(FrameworkIntegration, BatchedDecodeEqualsEachSequenceAlone) {
  if constexpr (kBatched)
    batched_decode_equals_each_sequence_alone<engine::Model>();
  else  // nothing batched to compare: the path is absent, as max_batch 1 asks (not skipped: the L1 gate runs all)
    EXPECT_EQ(kMaxBatch, 1) << "no batched decode path although max_batch asks for one";
}

TEST(FrameworkIntegration, BatchedDecodeRejectsBadBatchesBeforeCompute) {
  if constexpr (kBatched)
    batched_decode_rejects_bad_batches_before_compute<engine::Model>();
  else
    EXPECT_EQ(kMaxBatch, 1) << "no batched decode path although max_batch asks for one";
}

}  // namespace
