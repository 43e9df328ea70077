// Request scheduler (ckb/contracts/scheduler.toml). It only plans; the generation loop executes each plan on the
// model and reports the sampled tokens back, so the scheduler knows nothing of models, logits or text.
//
// A request moves waiting -> prefilling -> decoding -> finished:
//   waiting     submitted, not yet admitted. Admission is first come, first served: the oldest waiting request
//               is admitted when fewer than max_batch requests are running and enough KV blocks are free for its
//               whole budget, ceil((prompt + max_new_tokens) / kv_block_size) blocks (reserved up front, so a
//               running request can never run out of cache and nothing ever has to be preempted).
//   prefilling  its prompt is fed in chunks of chunked_prefill tokens (the whole prompt when 0). The step that
//               feeds the last chunk also samples the first generated token. With chunked_prefill > 0 it is also
//               the step's prefill budget: the prefilling requests share chunked_prefill tokens per step in
//               admission order (the oldest always advances; a later one only if its next whole chunk fits), so a
//               burst of arrivals delays the running decodes by at most about one chunk per step.
//   decoding    one token per step: the last generated token is fed and the next one sampled.
//   finished    on an EOS id, a stop string (detected by the caller on the text, reported in TokenResult::stop),
//               max_new_tokens generated, or cancel(); its slot and blocks are free for the next step's admissions.
// Every step advances every decoding request by exactly one token and at least the oldest prefilling request by one
// chunk (failure mode BUG-004-2: a step that advances nothing while requests run makes generation hang; a prefilling
// request left out waits at most until the ones before it finish their prefill).
//
// Prefix cache: an admission hook (set_admission_hook) is told of every request next_step() admits and answers
// how many prompt tokens are already in the KV cache (PrefixCache::attach, runtime/prefix_cache.h); the request's
// prefill then starts there. Block accounting stays conservative: the whole budget is reserved even when blocks are
// shared.
//
// Loop:
//   int id = scheduler.submit(request);                 // mi::Error when it can never fit
//   while (scheduler.has_work()) {
//     const StepPlan& plan = scheduler.next_step();
//     ... run plan.prefills / plan.decodes on the model, sample where `samples` ...
//     for (int done : scheduler.complete_step(results)) ...free the model sequence of `done`...
//   }
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "runtime/finish_reason.h"

namespace mi::runtime {

struct SchedulerLimits {
  int max_batch = 1;        // requests running at once
  int max_context = 512;    // tokens per request: prompt + generated
  int kv_block_size = 16;   // token positions per KV block
  int chunked_prefill = 0;  // prompt tokens per prefill chunk and per step (all requests); 0 = whole prompts, no budget
  int kv_blocks = 0;        // blocks in the KV pool; 0 = max_batch * ceil(max_context / kv_block_size)
};

struct Request {
  std::vector<int32_t> prompt_ids;  // non-empty
  int max_new_tokens = 0;           // >= 0; 0 finishes at once with reason `length`
  std::vector<int32_t> eos_ids;     // generating any of these finishes the request (the id is kept in output)
};

enum class RequestState { waiting, prefilling, decoding, finished };
const char* to_string(RequestState state);

struct RequestStatus {
  RequestState state = RequestState::waiting;
  FinishReason finish_reason = FinishReason::none;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;  // generated so far
  int prefilled = 0;                // prompt tokens already fed (or found in the cache by the admission hook)
  int max_new_tokens = 0;
  std::vector<int32_t> eos_ids;
  int kv_blocks = 0;                // blocks reserved while running
};

// One step's work. Requests are listed in admission order.
struct StepPlan {
  struct Prefill {
    int request;
    int first;   // prompt token range [first, first + count)
    int count;
    bool last;   // the final chunk: a token is sampled from its last row's logits
  };
  std::vector<int> admitted;      // requests that started this step (the loop gives each a model sequence)
  std::vector<Prefill> prefills;
  std::vector<int> decodes;       // feed output_ids.back() of these requests, sample one token each
  bool empty() const { return prefills.empty() && decodes.empty(); }
};

// A token sampled for a request in this step (a last prefill chunk or a decode).
struct TokenResult {
  int request;
  int32_t token;
  bool stop = false;  // the caller found a stop string in the text up to and including this token
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerLimits& limits);  // mi::Error naming a limit that is not positive

  // Queues a request; returns its id. mi::Error (naming the numbers) when the prompt is empty, max_new_tokens
  // is negative, or prompt + max_new_tokens exceeds max_context or the whole KV pool.
  int submit(Request request);

  // True while any request is waiting or running.
  bool has_work() const;

  // Admits waiting requests and plans one step for every running request. mi::Error if the previous plan was
  // not completed. The plan is valid until the next call.
  // With an admission hook, each admitted request's hook value n becomes its `prefilled` and its first prefill
  // chunk starts at n. If the hook throws, or returns n outside [0, prompt size), next_step() throws (mi::Error
  // for a bad n): that request stays waiting, the ones admitted before it in this call stay admitted (their hook
  // ran; the next plan includes them though it does not list them in `admitted`), and no plan is open.
  const StepPlan& next_step();

  // Called for each request next_step() admits, after it decided to admit it and before it plans the step;
  // returns how many prompt tokens are already in the KV cache (0 <= n < prompt size). Empty = no hook (n = 0).
  void set_admission_hook(std::function<int(int request)> hook) { admission_hook_ = std::move(hook); }

  // Finishes a waiting or running request at once with reason `cancelled`, releasing its slot and blocks (the
  // caller frees its model sequence). A no-op for a finished request; mi::Error for an unknown id. Between steps
  // any request may be cancelled; while a plan is open (next_step() returned a non-empty plan not yet completed)
  // only waiting ones: cancelling a running request, which is in that plan, is an mi::Error (complete the step
  // first, then cancel).
  void cancel(int request);

  // Records the step's outcome: `results` must hold exactly one token for every request that samples in the
  // current plan (last prefill chunks and decodes), and nothing else (mi::Error otherwise, state unchanged).
  // Returns the ids of requests that finished in this step; their slots and blocks are free again.
  std::vector<int> complete_step(std::span<const TokenResult> results);

  const RequestStatus& status(int request) const;  // mi::Error for an unknown id
  // Forgets a finished request (its status is no longer available).
  void release(int request);

  int running() const { return int(running_.size()); }
  int waiting() const { return int(waiting_.size()); }
  int free_kv_blocks() const { return free_blocks_; }
  const SchedulerLimits& limits() const { return limits_; }

 private:
  RequestStatus& checked(int request);
  int blocks_for(int tokens) const;
  void finish(int request, FinishReason reason);

  SchedulerLimits limits_;
  int free_blocks_ = 0;
  int next_id_ = 0;
  std::map<int, RequestStatus> requests_;
  std::vector<int> waiting_;  // FIFO
  std::vector<int> running_;  // admission order
  StepPlan plan_;
  bool plan_open_ = false;
  std::function<int(int)> admission_hook_;
};

}  // namespace mi::runtime
