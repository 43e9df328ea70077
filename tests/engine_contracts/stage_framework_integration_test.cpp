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

}  // namespace
