// The serving loop: continuous batching on one model, run on its own thread while HTTP threads submit requests.
//
// Iteration-level scheduling (Orca, Yu et al., OSDI 2022): between two model steps the loop takes new submissions
// into the Scheduler (runtime/scheduler.h), drops requests whose client went away, and plans one step in which
// every running request advances by one prefill chunk (chunked prefill, runtime.chunked_prefill tokens) or one
// token. All decoding requests of a step go through Model::forward_batch together: one pass over the weights for
// the whole batch (an engine generated for max_batch 1 has no forward_batch and decodes its one request alone).
// Prefill chunks run per request in the same step, within the scheduler's per-step prefill budget (chunked_prefill
// tokens over all prefilling requests, the oldest always advancing), so neither a long prompt nor a burst of new
// ones delays the running decodes by much more than one chunk per step.
//
// KV memory: the Scheduler reserves a request's whole budget (prompt + max_tokens) in KV blocks when it admits it,
// so the pool is never overcommitted and nothing is preempted: a request that does not fit waits in FIFO order.
// Blocks go back at finish or cancel. With the prefix cache, an admitted request first takes the cached blocks of
// its longest cached prompt prefix (exact token match, whole blocks; runtime/prefix_cache.h) and prefills only the
// rest; its own full prompt blocks are published after its prefill. Whether the engine has the prefix cache is a
// build-time choice: the loop's PrefixReuse type, runtime::PrefixCache or NoPrefixCache (server/no_prefix_cache.h),
// named by the generated engine_features.h.
//
// Per request, the same sampling, incremental detokenization and stop-string handling as the offline generation
// loop (engine/generation.h); greedy output does not depend on what else runs: decodes go through forward_batch in
// passes of at most kBatchInvariantRows rows, whose every row the kernels compute as a lone decode would (tested).
#pragma once
#include <algorithm>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/model_interface.h"
#include "engine/stop_text.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "server/api_error.h"
#include "server/request_channel.h"
#include "server/request_preparation.h"
#include "server/server_metrics.h"
#include "server/token_logprobs.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace mi::server {

// A model the server can drive: the engine model plus access to its paged KV cache (prefix cache, usage gauges).
template <class M>
concept ServableModel = engine::EngineModel<M> && requires(M m) {
  { m.kv_cache() } -> std::same_as<runtime::KvCache&>;
};

// How the loop reuses cached prompt prefixes, built over the model's KV cache: runtime::PrefixCache, or
// NoPrefixCache (attaches nothing, publishes nothing) in engines whose constraints leave the prefix cache off.
template <class P>
concept PrefixReuse = std::constructible_from<P, runtime::KvCache&> &&
                      requires(P p, const P cp, int seq, std::span<const int32_t> tokens) {
                        { P::kReusesPrefixes } -> std::convertible_to<bool>;
                        { p.attach(seq, tokens) } -> std::convertible_to<int>;
                        { p.publish(seq, tokens) };
                        { cp.cached_blocks() } -> std::convertible_to<std::size_t>;
                        { cp.queried_tokens() } -> std::convertible_to<long long>;
                        { cp.hit_tokens() } -> std::convertible_to<long long>;
                      };

// A cached KV prefix cannot restore the recurrent state of linear-attention layers (ckb/contracts/recurrent_state.toml):
// generated models with such layers say so, and the prefix cache is refused for them at build time.
template <class M, class P>
inline constexpr bool kPrefixReuseFits = !P::kReusesPrefixes || !requires { requires M::kHasRecurrentState; };

// Decode rows per forward_batch call (the kernels' batch-invariant token count, kMaxDotTokens at every level).
inline constexpr int kBatchInvariantRows = 8;

struct LoopOptions {
  runtime::SchedulerLimits limits;
  int max_waiting = 256;  // requests queued (not yet admitted) beyond which submit() answers 429
};

template <ServableModel M, PrefixReuse Prefix>
class ServingLoop {
  static_assert(kPrefixReuseFits<M, Prefix>,
                "prefix cache: this model has linear-attention layers whose recurrent state a cached KV prefix cannot "
                "restore; generate the engine without runtime.prefix_cache");

 public:
  using Clock = std::chrono::steady_clock;

  ServingLoop(M& model, const tok::Tokenizer* tokenizer, LoopOptions options, ServerMetrics& metrics)
      : model_(model),
        tokenizer_(tokenizer),
        options_(options),
        metrics_(metrics),
        vocab_(model.vocab_size()),
        prefix_(model.kv_cache()) {
    const std::vector<int> eos = model.eos_token_ids();
    eos_.assign(eos.begin(), eos.end());
    reset_scheduler();
  }

  // Any thread. Queues a prepared request; its events arrive on `channel`. ApiError 503 while draining, 429 when
  // max_waiting requests are already queued.
  void submit(PreparedRequest request, std::shared_ptr<RequestChannel> channel) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (draining_) throw ApiError(503, "server_error", "the server is shutting down; no new requests are accepted");
      // Queued beyond the free batch slots: a request that will be admitted at the next step is not waiting.
      const int free_slots = std::max(0, options_.limits.max_batch - gauges_.running);
      // moved_unpublished_: taken from the inbox by the loop and not yet in the gauges (they are refreshed after
      // the step), counted so a long step cannot let more than max_waiting requests queue.
      if (int(inbox_.size()) + moved_unpublished_ + waiting_in_scheduler_ - free_slots >= options_.max_waiting)
        throw ApiError(429, "rate_limit_error",
                       "the server is at capacity: " + std::to_string(options_.max_waiting) +
                           " requests are already waiting; retry later");
      inbox_.push_back({std::move(request), std::move(channel), Clock::now()});
    }
    wake_.notify_all();
  }

  // Stops accepting requests; run() returns once the ones in flight have finished.
  void drain() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      draining_ = true;
    }
    wake_.notify_all();
  }

  bool draining() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return draining_;
  }

  LoopGauges gauges() const {
    std::lock_guard<std::mutex> lock(mutex_);
    LoopGauges g = gauges_;
    g.waiting += int(inbox_.size()) + moved_unpublished_;
    return g;
  }

  // The loop itself (call on a dedicated thread).
  void run() {
    std::vector<float> logits(std::size_t(options_.limits.max_batch) * std::size_t(vocab_));
    while (true) {
      std::vector<Pending> incoming;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !inbox_.empty() || draining_ || scheduler_->has_work(); });
        if (inbox_.empty() && !scheduler_->has_work()) break;  // draining, nothing left
        incoming.swap(inbox_);
        moved_unpublished_ += int(incoming.size());
      }
      for (Pending& p : incoming) accept(std::move(p));
      drop_cancelled();
      if (scheduler_->has_work()) {
        try {
          step(logits);
        } catch (const std::exception& e) {
          fail_all(std::string("the model failed: ") + e.what());
        }
      }
      publish_gauges();
    }
    publish_gauges();
  }

 private:
  struct Pending {
    PreparedRequest request;
    std::shared_ptr<RequestChannel> channel;
    Clock::time_point arrival;
  };

  struct Live {
    PreparedRequest request;
    std::shared_ptr<RequestChannel> channel;
    Clock::time_point arrival, admitted, first_token, last_token;
    int sequence = -1;
    int cached = 0;
    std::unique_ptr<runtime::Sampler> sampler;
    std::unique_ptr<tok::StreamDecoder> decoder;
    std::unique_ptr<engine::StopTextFilter> stop;
    std::vector<int32_t> history;  // prompt + output (repetition penalty)
    std::vector<TokenLogprob> logprobs;  // sampled since the last event
    std::vector<int32_t> tokens;         // sampled since the last event (return_token_ids)
    std::string failure;           // set when this request failed inside a step; it is cancelled after the step
  };

  void reset_scheduler() {
    scheduler_ = std::make_unique<runtime::Scheduler>(options_.limits);
    scheduler_->set_admission_hook([this](int id) { return admit(id); });
  }

  int admit(int id) {
    Live& l = live_.at(id);
    l.admitted = Clock::now();
    l.sequence = model_.new_sequence();
    l.cached = prefix_.attach(l.sequence, std::span<const int32_t>(l.request.prompt_ids));
    return l.cached;
  }

  void accept(Pending p) {
    Live l;
    l.arrival = p.arrival;
    l.channel = std::move(p.channel);
    try {
      runtime::Request r;
      r.prompt_ids = p.request.prompt_ids;
      r.max_new_tokens = p.request.max_new_tokens;
      if (!p.request.ignore_eos) r.eos_ids = eos_;
      l.sampler = std::make_unique<runtime::Sampler>(p.request.sampling, vocab_);
      if (tokenizer_) {
        l.decoder = std::make_unique<tok::StreamDecoder>(*tokenizer_, /*skip_special=*/true);
        l.stop = std::make_unique<engine::StopTextFilter>(p.request.stop);
      }
      l.history = p.request.prompt_ids;
      l.history.reserve(p.request.prompt_ids.size() + std::size_t(p.request.max_new_tokens));
      l.request = std::move(p.request);
      const int id = scheduler_->submit(std::move(r));
      live_.emplace(id, std::move(l));
    } catch (const std::exception& e) {
      StreamEvent ev;
      ev.finished = true;
      ev.error = std::string("the request could not be scheduled: ") + e.what();
      l.channel->push(std::move(ev));
    }
  }

  // Requests whose client went away (or that failed in the last step) leave between steps.
  void drop_cancelled() {
    for (auto it = live_.begin(); it != live_.end();) {
      Live& l = it->second;
      if (!l.channel->cancelled() && l.failure.empty()) {
        ++it;
        continue;
      }
      scheduler_->cancel(it->first);
      if (l.sequence >= 0) model_.free_sequence(l.sequence);
      if (!l.failure.empty()) {
        StreamEvent ev;
        ev.finished = true;
        ev.error = l.failure;
        l.channel->push(std::move(ev));
      }
      scheduler_->release(it->first);
      it = live_.erase(it);
    }
  }

  void step(std::vector<float>& logits) {
    const runtime::StepPlan& plan = scheduler_->next_step();
    step_tokens_.clear();
    const auto prefill_start = Clock::now();
    long long prefill_tokens = 0;
    for (const runtime::StepPlan::Prefill& p : plan.prefills) {
      Live& l = live_.at(p.request);
      model_.forward(l.sequence, l.request.prompt_ids.data() + p.first, p.count, logits.data(), false);
      prefill_tokens += p.count;
      if (!p.last) continue;
      prefix_.publish(l.sequence, std::span<const int32_t>(l.request.prompt_ids));
      sample(p.request, l, std::span<const float>(logits.data(), std::size_t(vocab_)));
    }
    const auto decode_start = Clock::now();
    if (!plan.decodes.empty()) {
      seqs_.clear();
      ids_.clear();
      for (const int id : plan.decodes) {
        seqs_.push_back(live_.at(id).sequence);
        ids_.push_back(scheduler_->status(id).output_ids.back());
      }
      if constexpr (engine::BatchedEngineModel<M>) {
        // Passes of at most kBatchInvariantRows rows: up to that many tokens every kernel level computes each row
        // with the lone decode's FMAs in the same order (tests/unit/kernels/matmul_test.cpp), so a request's tokens
        // do not depend on what else runs; a larger batch reads the weights once per pass instead of once.
        for (std::size_t b0 = 0; b0 < seqs_.size(); b0 += kBatchInvariantRows) {
          const std::size_t n = std::min(seqs_.size() - b0, std::size_t(kBatchInvariantRows));
          model_.forward_batch(seqs_.data() + b0, ids_.data() + b0, int(n), logits.data() + b0 * std::size_t(vocab_));
        }
      } else {
        // An engine generated for max_batch 1 (no batched path): at most one request runs, decoded on its own.
        for (std::size_t b = 0; b < seqs_.size(); ++b)
          model_.forward(seqs_[b], &ids_[b], 1, logits.data() + b * std::size_t(vocab_), false);
      }
      for (std::size_t b = 0; b < plan.decodes.size(); ++b)
        sample(plan.decodes[b], live_.at(plan.decodes[b]),
               std::span<const float>(logits.data() + b * std::size_t(vocab_), std::size_t(vocab_)));
    }
    using Seconds = std::chrono::duration<double>;
    metrics_.observe_step(prefill_tokens, Seconds(decode_start - prefill_start).count(), (long long)plan.decodes.size(),
                          Seconds(Clock::now() - decode_start).count());
    for (const int id : scheduler_->complete_step(step_tokens_)) finish(id);
  }

  void sample(int id, Live& l, std::span<const float> row) {
    int32_t token = 0;
    try {
      token = l.sampler->sample(row, l.history);
    } catch (const std::exception& e) {
      // The scheduler expects a token from every sampling request: record a placeholder, cancel after the step.
      l.failure = std::string("sampling failed: ") + e.what();
      step_tokens_.push_back({id, token, false});
      return;
    }
    const auto now = Clock::now();
    if (scheduler_->status(id).output_ids.empty()) l.first_token = now;
    l.last_token = now;
    l.history.push_back(token);
    if (l.request.logprobs >= 0) {
      const RawLogprobs raw = token_logprobs(row, token, l.request.logprobs);
      TokenLogprob lp;
      lp.chosen = {token, token_text(token), raw.chosen};
      for (const auto& [alt, value] : raw.top) lp.top.push_back({alt, token_text(alt), value});
      l.logprobs.push_back(std::move(lp));
    }
    if (l.request.return_token_ids) l.tokens.push_back(token);
    bool stop = false;
    std::string text;
    const bool is_eos = !l.request.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end();
    if (l.decoder && !is_eos && tokenizer_->is_valid_id(token)) {
      text = l.stop->push(l.decoder->feed(token));
      stop = l.stop->stopped();
    }
    step_tokens_.push_back({id, token, stop});
    if (!text.empty() || !l.logprobs.empty() || !l.tokens.empty()) {
      StreamEvent ev;
      ev.text = std::move(text);
      ev.logprobs = std::move(l.logprobs);
      ev.token_ids = std::move(l.tokens);
      l.logprobs.clear();
      l.tokens.clear();
      l.channel->push(std::move(ev));
    }
  }

  std::string token_text(int32_t token) const {
    if (!tokenizer_ || !tokenizer_->is_valid_id(token)) return {};
    try {
      return tokenizer_->decode({token}, false);
    } catch (const std::exception&) {
      return {};
    }
  }

  void finish(int id) {
    Live& l = live_.at(id);
    const runtime::RequestStatus& s = scheduler_->status(id);
    if (l.sequence >= 0) model_.free_sequence(l.sequence);
    StreamEvent ev;
    ev.finished = true;
    ev.finish_reason = s.finish_reason == runtime::FinishReason::length ? "length" : "stop";
    if (l.decoder) {
      if (!l.stop->stopped()) ev.text += l.stop->push(l.decoder->finish());
      if (l.stop->stopped()) ev.finish_reason = "stop";
      ev.text += l.stop->finish();
    }
    ev.logprobs = std::move(l.logprobs);
    ev.token_ids = std::move(l.tokens);
    ev.usage = {int(s.prompt_ids.size()), int(s.output_ids.size()), l.cached};
    if (!l.failure.empty()) {
      ev.error = l.failure;
    } else {
      const auto now = Clock::now();
      const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
      const std::size_t n = s.output_ids.size();
      metrics_.count_tokens((long long)s.prompt_ids.size(), (long long)n);
      metrics_.observe_request(n ? seconds(l.first_token - l.arrival) : seconds(now - l.arrival),
                               n > 1 ? seconds(l.last_token - l.first_token) / double(n - 1) : 0.0, n > 1,
                               seconds(now - l.arrival), seconds(l.admitted - l.arrival));
    }
    l.channel->push(std::move(ev));
    scheduler_->release(id);
    live_.erase(id);
  }

  // A failure of the model itself: every request that was running gets the error and the state starts over. A
  // request still waiting that never got a sequence (its admission did not start) never touched the model: it queues
  // again, in arrival order. One whose admission began (and threw) fails like the running ones, so a request that
  // cannot be admitted is answered rather than retried for ever.
  void fail_all(const std::string& message) {
    std::vector<Pending> requeue;
    for (auto& [id, l] : live_) {
      if (l.sequence < 0 && scheduler_->status(id).state == runtime::RequestState::waiting) {
        requeue.push_back({std::move(l.request), std::move(l.channel), l.arrival});
        continue;
      }
      if (l.sequence >= 0) model_.free_sequence(l.sequence);
      StreamEvent ev;
      ev.finished = true;
      ev.error = message;
      l.channel->push(std::move(ev));
    }
    live_.clear();
    reset_scheduler();
    for (Pending& p : requeue) accept(std::move(p));  // live_ is ordered by scheduler id: arrival order
  }

  void publish_gauges() {
    const runtime::KvCache& cache = model_.kv_cache();
    LoopGauges g;
    g.running = scheduler_->running();
    g.waiting = scheduler_->waiting();
    g.kv_blocks_total = (long long)cache.total_blocks();
    g.kv_blocks_used = (long long)(cache.total_blocks() - cache.free_blocks());
    g.kv_blocks_cached = (long long)prefix_.cached_blocks();
    g.prefix_queried_tokens = prefix_.queried_tokens();
    g.prefix_hit_tokens = prefix_.hit_tokens();
    std::lock_guard<std::mutex> lock(mutex_);
    gauges_ = g;
    waiting_in_scheduler_ = g.waiting;
    moved_unpublished_ = 0;  // the accepted ones are now in running or waiting, the refused ones gone
  }

  M& model_;
  const tok::Tokenizer* tokenizer_;
  LoopOptions options_;
  ServerMetrics& metrics_;
  const int vocab_;
  std::vector<int32_t> eos_;
  Prefix prefix_;  // over model_'s KV cache (loop thread only)

  std::unique_ptr<runtime::Scheduler> scheduler_;  // loop thread only
  std::map<int, Live> live_;                      // scheduler id -> request (loop thread only)
  std::vector<runtime::TokenResult> step_tokens_;
  std::vector<int> seqs_;
  std::vector<int32_t> ids_;

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::vector<Pending> inbox_;
  bool draining_ = false;
  int waiting_in_scheduler_ = 0;
  int moved_unpublished_ = 0;  // requests the loop took from inbox_ since the last publish_gauges()
  LoopGauges gauges_;
};

}  // namespace mi::server
