// A model for the server's tests: a real paged KV cache (runtime/kv_cache.h) and next-token logits that depend on
// every token stored in the sequence's cache, read back through the block table. So a sequence whose cache holds
// wrong blocks (a bad prefix-cache hit, a block freed too early, two sequences sharing what they must not) produces
// other tokens, and batching equivalence is checked on what the cache really holds, in milliseconds.
//
// The stored token of position p is key(seq, 0, 0, p)[0]. Next token: h = sum_p (token_p + 1) * (p + 1) over all
// positions, id = kFirst + h % kSpan (a range of ids that decode to single printable characters in the Qwen3
// tokenizer); its logit is 8, every other 0, so greedy is exact and sampling still has a spread.
#pragma once
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/model_interface.h"
#include "runtime/kv_cache.h"

namespace mi::server::test {

// kBatched = false: a model generated for max_batch 1, without forward_batch (the serving loop decodes it alone).
template <bool kBatched = true>
class FakeModelT {
 public:
  static constexpr int kFirst = 33;  // '!' .. in the byte-level alphabet
  static constexpr int kSpan = 58;

  // kv_blocks: the pool (0 = max_batch x max_context worth), as runtime.kv_blocks sizes a generated engine's.
  FakeModelT(int vocab, int max_batch, int max_context, int block, int kv_blocks = 0)
      : vocab_(vocab), cache_({1, 1, 4, max_batch, max_context, block, kv_blocks}) {}

  engine::ModelFacts facts() const { return {"FakeForCausalLM", "fake", "scalar", vocab_, 1 << 20}; }
  int vocab_size() const { return vocab_; }
  int new_sequence() { return cache_.allocate_sequence(); }
  void free_sequence(int seq) { cache_.free_sequence(seq); }
  int sequence_length(int seq) const { return cache_.length(seq); }
  std::vector<int> eos_token_ids() const { return {eos_}; }
  runtime::KvCache& kv_cache() { return cache_; }

  void forward(int seq, const int32_t* ids, int n, float* logits, bool all_rows) {
    if (all_rows) throw std::logic_error("FakeModel: all_rows is not used by the server");
    before_step(&seq, n == 1 ? 1 : 0);
    const int start = cache_.append(seq, n);
    for (int i = 0; i < n; ++i) cache_.key(seq, 0, 0, start + i)[0] = float(ids[i]);
    write_logits(seq, logits);
    prefilled_tokens += n;
  }

  void forward_batch(const int* seqs, const int32_t* ids, int n, float* logits)
    requires kBatched
  {
    before_step(seqs, n);
    for (int b = 0; b < n; ++b) {
      const int pos = cache_.append(seqs[b], 1);
      cache_.key(seqs[b], 0, 0, pos)[0] = float(ids[b]);
      write_logits(seqs[b], logits + std::size_t(b) * std::size_t(vocab_));
    }
    ++batch_calls;
    max_batch_seen = std::max(max_batch_seen.load(), n);
  }

  // The greedy continuation of `prompt` for `steps` tokens, computed without any cache.
  static std::vector<int32_t> expected(std::vector<int32_t> tokens, int steps) {
    std::vector<int32_t> out;
    for (int s = 0; s < steps; ++s) {
      long long h = 0;
      for (std::size_t p = 0; p < tokens.size(); ++p) h += (long long)(tokens[p] + 1) * (long long)(p + 1);
      const int32_t next = int32_t(kFirst + h % kSpan);
      out.push_back(next);
      tokens.push_back(next);
    }
    return out;
  }

  // Fault injection: the first decode step that would take a sequence to fail_at_length tokens throws (once), as a
  // model failing mid-request would; every step first sleeps step_delay_ms (so tests can queue requests behind one).
  std::atomic<int> fail_at_length{-1};
  std::atomic<int> step_delay_ms{0};

  int eos_ = 0;  // id 0 ('!' is 0 in Qwen3's byte-level alphabet, never produced: kFirst > 0)
  std::atomic<long long> prefilled_tokens{0};
  std::atomic<int> batch_calls{0};
  std::atomic<int> max_batch_seen{0};

 private:
  void before_step(const int* seqs, int decodes) {
    if (step_delay_ms.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms.load()));
    int at = fail_at_length.load();
    for (int b = 0; b < decodes && at >= 0; ++b)
      if (cache_.length(seqs[b]) + 1 == at && fail_at_length.compare_exchange_strong(at, -1))
        throw std::runtime_error("injected model failure");
  }

  void write_logits(int seq, float* logits) {
    long long h = 0;
    const int n = cache_.length(seq);
    for (int p = 0; p < n; ++p) h += (long long)(cache_.key(seq, 0, 0, p)[0] + 1) * (long long)(p + 1);
    for (int v = 0; v < vocab_; ++v) logits[v] = 0.0f;
    logits[kFirst + h % kSpan] = 8.0f;
  }

  int vocab_;
  runtime::KvCache cache_;
};

using FakeModel = FakeModelT<true>;
using FakeSingleSequenceModel = FakeModelT<false>;
static_assert(engine::BatchedEngineModel<FakeModel> && !engine::BatchedEngineModel<FakeSingleSequenceModel>);

}  // namespace mi::server::test
