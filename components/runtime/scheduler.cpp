#include "runtime/scheduler.h"

#include <algorithm>

#include "common/error.h"

namespace mi::runtime {

const char* to_string(RequestState state) {
  switch (state) {
    case RequestState::waiting: return "waiting";
    case RequestState::prefilling: return "prefilling";
    case RequestState::decoding: return "decoding";
    case RequestState::finished: return "finished";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerLimits& limits) : limits_(limits) {
  if (limits_.max_batch <= 0) fail("scheduler: max_batch must be positive, got ", limits_.max_batch);
  if (limits_.max_context <= 0) fail("scheduler: max_context must be positive, got ", limits_.max_context);
  if (limits_.kv_block_size <= 0) fail("scheduler: kv_block_size must be positive, got ", limits_.kv_block_size);
  if (limits_.chunked_prefill < 0)
    fail("scheduler: chunked_prefill must be >= 0 (0 = whole prompt), got ", limits_.chunked_prefill);
  if (limits_.kv_blocks < 0) fail("scheduler: kv_blocks must be >= 0 (0 = enough for max_batch), got ", limits_.kv_blocks);
  if (limits_.kv_blocks == 0) limits_.kv_blocks = limits_.max_batch * blocks_for(limits_.max_context);
  free_blocks_ = limits_.kv_blocks;
  waiting_.reserve(16);
  running_.reserve(std::size_t(limits_.max_batch));
}

int Scheduler::blocks_for(int tokens) const { return (tokens + limits_.kv_block_size - 1) / limits_.kv_block_size; }

int Scheduler::submit(Request request) {
  const int prompt = int(request.prompt_ids.size());
  if (prompt == 0) fail("request rejected: the prompt is empty (at least one token is needed)");
  if (request.max_new_tokens < 0) fail("request rejected: max_new_tokens must be >= 0, got ", request.max_new_tokens);
  const long long total = (long long)prompt + request.max_new_tokens;
  if (total > limits_.max_context)
    fail("request rejected: prompt of ", prompt, " tokens + max_new_tokens ", request.max_new_tokens, " = ", total,
         " tokens exceeds max_context ", limits_.max_context);
  const int blocks = blocks_for(int(total));
  if (blocks > limits_.kv_blocks)
    fail("request rejected: ", total, " tokens need ", blocks, " KV blocks of ", limits_.kv_block_size,
         " but the pool holds ", limits_.kv_blocks);

  const int id = next_id_++;
  RequestStatus& s = requests_[id];
  s.prompt_ids = std::move(request.prompt_ids);
  s.max_new_tokens = request.max_new_tokens;
  s.eos_ids = std::move(request.eos_ids);
  s.output_ids.reserve(std::size_t(s.max_new_tokens));
  s.kv_blocks = blocks;
  if (s.max_new_tokens == 0) {
    s.state = RequestState::finished;  // nothing to generate: never takes a slot
    s.finish_reason = FinishReason::length;
  } else {
    waiting_.push_back(id);
  }
  return id;
}

bool Scheduler::has_work() const { return !waiting_.empty() || !running_.empty(); }

RequestStatus& Scheduler::checked(int request) {
  auto it = requests_.find(request);
  if (it == requests_.end()) fail("scheduler: unknown request id ", request);
  return it->second;
}

const RequestStatus& Scheduler::status(int request) const {
  auto it = requests_.find(request);
  if (it == requests_.end()) fail("scheduler: unknown request id ", request);
  return it->second;
}

void Scheduler::release(int request) {
  const RequestStatus& s = checked(request);
  if (s.state != RequestState::finished)
    fail("scheduler: request ", request, " is ", to_string(s.state), "; only finished requests can be released");
  requests_.erase(request);
}

const StepPlan& Scheduler::next_step() {
  if (plan_open_) fail("scheduler: next_step() called before complete_step() of the previous step");
  plan_.admitted.clear();
  plan_.prefills.clear();
  plan_.decodes.clear();

  // First come, first served: the head of the queue waits for room rather than being overtaken.
  std::size_t admitted = 0;
  while (admitted < waiting_.size() && int(running_.size()) < limits_.max_batch) {
    const int id = waiting_[admitted];
    RequestStatus& s = requests_.at(id);
    if (s.kv_blocks > free_blocks_) break;
    int cached = 0;
    if (admission_hook_) {
      try {
        cached = admission_hook_(id);
      } catch (...) {
        waiting_.erase(waiting_.begin(), waiting_.begin() + std::ptrdiff_t(admitted));
        throw;
      }
      if (cached < 0 || cached >= int(s.prompt_ids.size())) {
        waiting_.erase(waiting_.begin(), waiting_.begin() + std::ptrdiff_t(admitted));
        fail("scheduler: the admission hook reports ", cached, " cached prompt tokens for request ", id,
             "; expected 0 <= n < prompt size ", s.prompt_ids.size());
      }
    }
    free_blocks_ -= s.kv_blocks;
    s.state = RequestState::prefilling;
    s.prefilled = cached;
    running_.push_back(id);
    plan_.admitted.push_back(id);
    ++admitted;
  }
  waiting_.erase(waiting_.begin(), waiting_.begin() + std::ptrdiff_t(admitted));

  // Prefill token budget: chunked_prefill tokens per step over all prefilling requests, in admission order. The
  // oldest prefilling request always advances; a later one advances only if its whole next chunk still fits, so a
  // request's chunk boundaries never depend on what else runs (its logits do not either).
  const bool budgeted = limits_.chunked_prefill > 0;
  int prefill_tokens = 0;
  for (const int id : running_) {
    const RequestStatus& s = requests_.at(id);
    if (s.state == RequestState::prefilling) {
      const int prompt = int(s.prompt_ids.size());
      const int left = prompt - s.prefilled;
      const int count = budgeted ? std::min(limits_.chunked_prefill, left) : left;
      if (budgeted && prefill_tokens > 0 && prefill_tokens + count > limits_.chunked_prefill) continue;
      prefill_tokens += count;
      plan_.prefills.push_back({id, s.prefilled, count, s.prefilled + count == prompt});
    } else {
      plan_.decodes.push_back(id);
    }
  }
  plan_open_ = !plan_.empty();
  return plan_;
}

std::vector<int> Scheduler::complete_step(std::span<const TokenResult> results) {
  if (!plan_open_) {
    if (results.empty()) return {};
    fail("scheduler: complete_step() with ", results.size(), " results but no step is planned");
  }
  // Check before changing anything: one result per sampling request of the plan, no strangers, no duplicates.
  std::size_t expected = plan_.decodes.size();
  for (const StepPlan::Prefill& p : plan_.prefills) expected += p.last ? 1 : 0;
  if (results.size() != expected)
    fail("scheduler: step expects ", expected, " sampled tokens, got ", results.size());
  const auto result_for = [&](int id) -> const TokenResult* {
    const TokenResult* found = nullptr;
    for (const TokenResult& r : results)
      if (r.request == id) {
        if (found) fail("scheduler: two results for request ", id, " in one step");
        found = &r;
      }
    return found;
  };
  for (const StepPlan::Prefill& p : plan_.prefills)
    if (p.last && !result_for(p.request)) fail("scheduler: no sampled token for request ", p.request, " (last prefill chunk)");
  for (const int id : plan_.decodes)
    if (!result_for(id)) fail("scheduler: no sampled token for decoding request ", id);

  for (const StepPlan::Prefill& p : plan_.prefills) {
    RequestStatus& s = requests_.at(p.request);
    s.prefilled += p.count;
    if (p.last) s.state = RequestState::decoding;
  }
  std::vector<int> finished;
  for (const TokenResult& r : results) {
    RequestStatus& s = requests_.at(r.request);
    s.output_ids.push_back(r.token);
    FinishReason reason = FinishReason::none;
    if (std::find(s.eos_ids.begin(), s.eos_ids.end(), r.token) != s.eos_ids.end())
      reason = FinishReason::eos;
    else if (r.stop)
      reason = FinishReason::stop;
    else if (int(s.output_ids.size()) >= s.max_new_tokens)
      reason = FinishReason::length;
    if (reason != FinishReason::none) {
      finish(r.request, reason);
      finished.push_back(r.request);
    }
  }
  plan_open_ = false;
  return finished;
}

void Scheduler::cancel(int request) {
  RequestStatus& s = checked(request);
  switch (s.state) {
    case RequestState::finished: return;
    case RequestState::waiting:
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), request));
      s.state = RequestState::finished;
      s.finish_reason = FinishReason::cancelled;
      return;
    case RequestState::prefilling:
    case RequestState::decoding:
      if (plan_open_)
        fail("scheduler: cannot cancel request ", request, " (", to_string(s.state),
             ") while its step is planned; complete the step first");
      finish(request, FinishReason::cancelled);
      return;
  }
}

void Scheduler::finish(int request, FinishReason reason) {
  RequestStatus& s = requests_.at(request);
  s.state = RequestState::finished;
  s.finish_reason = reason;
  free_blocks_ += s.kv_blocks;
  running_.erase(std::find(running_.begin(), running_.end(), request));
}

}  // namespace mi::runtime
