// Scheduler (ckb/contracts/scheduler.toml): the request state machine, chunked prefill step counting, admission
// by max_batch and KV blocks, rejection, finishing on EOS / stop / length, freeing, and the BUG-004-2 invariant
// that every step advances every decoding request by one token and at least the oldest prefill by one chunk.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/scheduler.h"

namespace {

using mi::runtime::FinishReason;
using mi::runtime::Request;
using mi::runtime::RequestState;
using mi::runtime::Scheduler;
using mi::runtime::SchedulerLimits;
using mi::runtime::StepPlan;
using mi::runtime::TokenResult;

SchedulerLimits limits(int max_batch, int max_context, int chunk = 0, int block = 16) {
  SchedulerLimits l;
  l.max_batch = max_batch;
  l.max_context = max_context;
  l.chunked_prefill = chunk;
  l.kv_block_size = block;
  return l;
}

Request request(int prompt_tokens, int max_new_tokens, std::vector<int32_t> eos = {}) {
  Request r;
  r.prompt_ids.resize(std::size_t(prompt_tokens));
  std::iota(r.prompt_ids.begin(), r.prompt_ids.end(), 1);
  r.max_new_tokens = max_new_tokens;
  r.eos_ids = std::move(eos);
  return r;
}

// Samples token `token` for every request that samples in the plan.
std::vector<TokenResult> tokens_for(const StepPlan& plan, int32_t token = 7) {
  std::vector<TokenResult> out;
  for (const auto& p : plan.prefills)
    if (p.last) out.push_back({p.request, token});
  for (const int id : plan.decodes) out.push_back({id, token});
  return out;
}

TEST(Scheduler, StateMachineWaitingPrefillingDecodingFinished) {
  Scheduler s(limits(1, 64));
  const int id = s.submit(request(5, 3));
  EXPECT_EQ(s.status(id).state, RequestState::waiting);
  EXPECT_TRUE(s.has_work());

  const StepPlan& p1 = s.next_step();
  EXPECT_EQ(p1.admitted, std::vector<int>{id});
  ASSERT_EQ(p1.prefills.size(), 1u);
  EXPECT_EQ(p1.prefills[0].first, 0);
  EXPECT_EQ(p1.prefills[0].count, 5);
  EXPECT_TRUE(p1.prefills[0].last);
  EXPECT_TRUE(p1.decodes.empty());
  EXPECT_EQ(s.status(id).state, RequestState::prefilling);
  EXPECT_TRUE(s.complete_step(tokens_for(p1, 10)).empty());
  EXPECT_EQ(s.status(id).state, RequestState::decoding);
  EXPECT_EQ(s.status(id).prefilled, 5);

  const StepPlan& p2 = s.next_step();
  EXPECT_TRUE(p2.admitted.empty());
  EXPECT_TRUE(p2.prefills.empty());
  EXPECT_EQ(p2.decodes, std::vector<int>{id});
  EXPECT_TRUE(s.complete_step(tokens_for(p2, 11)).empty());

  const StepPlan& p3 = s.next_step();
  EXPECT_EQ(s.complete_step(tokens_for(p3, 12)), std::vector<int>{id});
  EXPECT_EQ(s.status(id).state, RequestState::finished);
  EXPECT_EQ(s.status(id).finish_reason, FinishReason::length);
  EXPECT_EQ(s.status(id).output_ids, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_FALSE(s.has_work());
  EXPECT_TRUE(s.next_step().empty());
}

TEST(Scheduler, ChunkedPrefillStepCount) {
  // prompt 10 in chunks of 4: 3 prefill steps (4, 4, 2; the last samples the first token) + 5 decode steps
  Scheduler s(limits(1, 64, 4));
  const int id = s.submit(request(10, 6));
  std::vector<std::pair<int, int>> chunks;
  int steps = 0, decode_steps = 0;
  while (s.has_work()) {
    const StepPlan& plan = s.next_step();
    ++steps;
    for (const auto& p : plan.prefills) {
      chunks.push_back({p.first, p.count});
      EXPECT_EQ(p.last, p.first + p.count == 10);
    }
    decode_steps += int(plan.decodes.size());
    s.complete_step(tokens_for(plan));
  }
  EXPECT_EQ(chunks, (std::vector<std::pair<int, int>>{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(decode_steps, 5);
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(s.status(id).output_ids.size(), 6u);
  EXPECT_EQ(s.status(id).prefilled, 10);
}

TEST(Scheduler, ChunkEqualToPromptAndLargerThanPromptIsOneStep) {
  for (const int chunk : {8, 100}) {
    Scheduler s(limits(1, 64, chunk));
    s.submit(request(8, 1));
    const StepPlan& plan = s.next_step();
    ASSERT_EQ(plan.prefills.size(), 1u);
    EXPECT_EQ(plan.prefills[0].count, 8);
    EXPECT_TRUE(plan.prefills[0].last);
    s.complete_step(tokens_for(plan));
    EXPECT_FALSE(s.has_work());
  }
}

// BUG-004-2: with many requests of different lengths arriving over time, every step advances every decoding request
// by one token and at least the oldest prefilling request by one chunk, no request twice; a later prefilling request
// only advances when its whole next chunk fits the step's budget of chunked_prefill tokens. The number of steps each
// request is planned is exactly its chunk count + tokens - 1, and every request finishes.
TEST(Scheduler, EveryStepAdvancesEveryDecodeAndTheOldestPrefillWithinTheBudget) {
  Scheduler s(limits(3, 128, 5));
  std::map<int, int> steps_planned, expected_steps;
  const std::vector<std::pair<int, int>> shapes{{1, 4}, {12, 2}, {5, 9}, {23, 1}, {7, 7}, {16, 3}, {2, 12}, {9, 3}, {3, 5}};
  std::size_t next_submit = 0;
  int step = 0;
  bool some_prefill_waited = false;
  while (next_submit < shapes.size() || s.has_work()) {
    if (next_submit < shapes.size() && step % 2 == 0) {  // a request arrives every other step
      const auto [prompt, gen] = shapes[next_submit++];
      const int id = s.submit(request(prompt, gen));
      expected_steps[id] = (prompt + 4) / 5 + gen - 1;
    }
    const StepPlan& plan = s.next_step();
    std::multiset<int> planned;
    int prefill_tokens = 0;
    for (const auto& p : plan.prefills) {
      planned.insert(p.request);
      EXPECT_EQ(p.first, s.status(p.request).prefilled) << "chunks follow each other";
      EXPECT_EQ(p.count, std::min(5, int(s.status(p.request).prompt_ids.size()) - p.first)) << "fixed chunk boundaries";
      prefill_tokens += p.count;
    }
    if (plan.prefills.size() > 1) EXPECT_LE(prefill_tokens, 5) << "step " << step << " exceeds the prefill budget";
    for (const int id : plan.decodes) planned.insert(id);
    // Which running requests must be in the plan: every decoding one, and the oldest prefilling one.
    int oldest_prefilling = -1, prefilling = 0, decoding = 0;
    for (int id = 0; id < int(next_submit); ++id) {
      const auto state = s.status(id).state;
      if (state == RequestState::prefilling) {
        ++prefilling;
        if (oldest_prefilling < 0) oldest_prefilling = id;
      } else if (state == RequestState::decoding) {
        ++decoding;
        EXPECT_EQ(planned.count(id), 1u) << "decoding request " << id << " not advanced at step " << step;
      }
    }
    if (oldest_prefilling >= 0) EXPECT_EQ(planned.count(oldest_prefilling), 1u) << "oldest prefill left out";
    EXPECT_EQ(int(plan.decodes.size()), decoding);
    some_prefill_waited = some_prefill_waited || int(plan.prefills.size()) < prefilling;
    EXPECT_LE(s.running(), 3);
    for (const int id : planned) {
      EXPECT_EQ(planned.count(id), 1u) << "request " << id << " planned twice";
      ++steps_planned[id];
    }
    s.complete_step(tokens_for(plan));
    ++step;
    ASSERT_LT(step, 1000) << "scheduler does not make progress";
  }
  EXPECT_TRUE(some_prefill_waited) << "the workload never exercised the budget";
  EXPECT_EQ(steps_planned, expected_steps);
  for (const auto& [id, steps] : expected_steps) EXPECT_EQ(s.status(id).state, RequestState::finished);
  EXPECT_EQ(s.free_kv_blocks(), s.limits().kv_blocks);
}

// Without chunked prefill there is no budget: every admitted prompt is prefilled whole in the step it arrives.
TEST(Scheduler, WithoutChunkedPrefillEveryNewPromptPrefillsAtOnce) {
  Scheduler s(limits(4, 128, 0));
  for (int i = 0; i < 3; ++i) s.submit(request(20 + i, 2));
  const StepPlan& plan = s.next_step();
  ASSERT_EQ(plan.prefills.size(), 3u);
  for (const auto& p : plan.prefills) EXPECT_TRUE(p.last);
  s.complete_step(tokens_for(plan));
}

// A burst of long prompts: one chunk per step between the running decodes, not one chunk per new request.
TEST(Scheduler, ABurstOfPromptsSharesOneChunkPerStep) {
  Scheduler s(limits(4, 256, 16));
  const int running = s.submit(request(4, 50));
  s.complete_step(tokens_for(s.next_step()));  // prefilled; decoding from now on
  for (int i = 0; i < 3; ++i) s.submit(request(40, 2));
  int steps = 0;
  while (s.status(3).state != RequestState::decoding) {
    const StepPlan& plan = s.next_step();
    int tokens = 0;
    for (const auto& p : plan.prefills) tokens += p.count;
    EXPECT_LE(tokens, 16);
    ASSERT_EQ(plan.decodes.size(), std::size_t(1 + (s.status(1).state == RequestState::decoding) +
                                                (s.status(2).state == RequestState::decoding)));
    EXPECT_EQ(plan.decodes[0], running);
    s.complete_step(tokens_for(plan));
    ASSERT_LT(++steps, 100);
  }
  EXPECT_EQ(steps, 9);  // 3 prompts x 3 chunks (16, 16, 8), one per step: an 8-token last chunk and the next
                        // request's 16-token first chunk do not fit one budget of 16
}

// A later prefilling request advances in the same step when its whole next chunk fits what the older ones left of the
// budget (here the oldest one's 8-token last chunk and the newest one's 8-token prompt share 16), even past one whose
// chunk does not fit, and never with a chunk cut to fit.
TEST(Scheduler, ALaterPrefillJoinsTheStepWhenItsWholeChunkFits) {
  Scheduler s(limits(4, 256, 16));
  // c arrives before b: b's chunk joins the older ones past c, whose 16-token chunk does not fit.
  const int a = s.submit(request(40, 2)), c = s.submit(request(20, 2)), b = s.submit(request(8, 2));
  std::vector<std::vector<std::pair<int, int>>> steps;  // per step: (request, count)
  while (s.status(c).state != RequestState::decoding) {
    const StepPlan& plan = s.next_step();
    steps.emplace_back();
    for (const auto& p : plan.prefills) steps.back().push_back({p.request, p.count});
    s.complete_step(tokens_for(plan));
    ASSERT_LT(steps.size(), 20u);
  }
  using Step = std::vector<std::pair<int, int>>;
  EXPECT_EQ(steps, (std::vector<Step>{{{a, 16}}, {{a, 16}}, {{a, 8}, {b, 8}}, {{c, 16}}, {{c, 4}}}));
}

TEST(Scheduler, AdmissionLimitedByMaxBatchInArrivalOrder) {
  Scheduler s(limits(2, 64));
  const int a = s.submit(request(3, 1)), b = s.submit(request(3, 3)), c = s.submit(request(3, 1));
  const StepPlan& p1 = s.next_step();
  EXPECT_EQ(p1.admitted, (std::vector<int>{a, b}));
  EXPECT_EQ(s.status(c).state, RequestState::waiting);
  EXPECT_EQ(s.waiting(), 1);
  EXPECT_EQ(s.complete_step(tokens_for(p1)), std::vector<int>{a});  // a is done after one token
  const StepPlan& p2 = s.next_step();
  EXPECT_EQ(p2.admitted, std::vector<int>{c});
  EXPECT_EQ(p2.decodes, std::vector<int>{b});
  ASSERT_EQ(p2.prefills.size(), 1u);
  EXPECT_EQ(p2.prefills[0].request, c);
}

TEST(Scheduler, AdmissionWaitsForKvBlocksFirstComeFirstServed) {
  SchedulerLimits l = limits(4, 64, 0, 4);
  l.kv_blocks = 6;
  Scheduler s(l);
  const int a = s.submit(request(10, 6));  // 16 tokens: 4 blocks
  const int b = s.submit(request(6, 2));   // 8 tokens: 2 blocks
  const int c = s.submit(request(1, 1));   // 1 block: waits, the pool is full
  const int d = s.submit(request(2, 1));   // 1 block: no room left
  const StepPlan& p1 = s.next_step();
  EXPECT_EQ(p1.admitted, (std::vector<int>{a, b}));
  EXPECT_EQ(s.free_kv_blocks(), 0);
  EXPECT_EQ(s.status(c).state, RequestState::waiting);
  EXPECT_EQ(s.status(d).state, RequestState::waiting);
  s.complete_step(tokens_for(p1));
  const StepPlan& p2 = s.next_step();
  EXPECT_TRUE(p2.admitted.empty());
  EXPECT_EQ(s.complete_step(tokens_for(p2)), std::vector<int>{b});  // b: 2 tokens
  EXPECT_EQ(s.free_kv_blocks(), 2);
  const StepPlan& p3 = s.next_step();
  EXPECT_EQ(p3.admitted, (std::vector<int>{c, d}));
  EXPECT_EQ(s.free_kv_blocks(), 0);
}

TEST(Scheduler, DefaultKvPoolHoldsMaxBatchFullContexts) {
  Scheduler s(limits(3, 100, 0, 16));
  EXPECT_EQ(s.limits().kv_blocks, 3 * 7);
  EXPECT_EQ(s.free_kv_blocks(), 21);
}

TEST(Scheduler, RejectsRequestsThatCanNeverFit) {
  Scheduler s(limits(1, 64));
  try {
    s.submit(request(60, 10));
    ADD_FAILURE() << "expected a rejection";
  } catch (const mi::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("prompt of 60 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("max_new_tokens 10"), std::string::npos) << m;
    EXPECT_NE(m.find("max_context 64"), std::string::npos) << m;
  }
  EXPECT_THROW(s.submit(request(0, 1)), mi::Error);
  EXPECT_THROW(s.submit(request(3, -1)), mi::Error);
  EXPECT_NO_THROW(s.submit(request(60, 4)));  // exactly max_context
  SchedulerLimits small = limits(2, 64, 0, 16);
  small.kv_blocks = 2;
  Scheduler t(small);
  EXPECT_THROW(t.submit(request(30, 10)), mi::Error);  // 3 blocks > whole pool
  EXPECT_FALSE(t.has_work());
}

TEST(Scheduler, BadLimitsAreErrors) {
  EXPECT_THROW(Scheduler(limits(0, 64)), mi::Error);
  EXPECT_THROW(Scheduler(limits(1, 0)), mi::Error);
  EXPECT_THROW(Scheduler(limits(1, 64, -1)), mi::Error);
  EXPECT_THROW(Scheduler(limits(1, 64, 0, 0)), mi::Error);
}

TEST(Scheduler, FinishesOnEosAndStopAndFreesTheSlot) {
  Scheduler s(limits(2, 64));
  const int e = s.submit(request(2, 10, {99, 100}));
  const int t = s.submit(request(2, 10, {99}));
  const StepPlan& p1 = s.next_step();
  std::vector<TokenResult> r{{e, 5}, {t, 6}};
  EXPECT_TRUE(s.complete_step(r).empty());
  s.next_step();
  r = {{e, 100}, {t, 8, /*stop=*/true}};
  EXPECT_EQ(s.complete_step(r), (std::vector<int>{e, t}));
  EXPECT_EQ(s.status(e).finish_reason, FinishReason::eos);
  EXPECT_EQ(s.status(e).output_ids, (std::vector<int32_t>{5, 100}));  // the EOS id is kept
  EXPECT_EQ(s.status(t).finish_reason, FinishReason::stop);
  EXPECT_EQ(s.running(), 0);
  EXPECT_EQ(s.free_kv_blocks(), s.limits().kv_blocks);
  EXPECT_FALSE(s.has_work());
  (void)p1;
}

TEST(Scheduler, EosWinsOverStopAndLength) {
  Scheduler s(limits(1, 64));
  const int id = s.submit(request(2, 1, {3}));
  s.next_step();
  const std::vector<TokenResult> r{{id, 3, true}};
  s.complete_step(r);
  EXPECT_EQ(s.status(id).finish_reason, FinishReason::eos);
}

TEST(Scheduler, ZeroMaxNewTokensFinishesAtSubmit) {
  Scheduler s(limits(1, 64));
  const int id = s.submit(request(4, 0));
  EXPECT_EQ(s.status(id).state, RequestState::finished);
  EXPECT_EQ(s.status(id).finish_reason, FinishReason::length);
  EXPECT_FALSE(s.has_work());
}

TEST(Scheduler, CompleteStepChecksResultsAgainstThePlan) {
  Scheduler s(limits(2, 64, 2));
  const int b = s.submit(request(1, 3)), a = s.submit(request(4, 3));
  s.complete_step(tokens_for(s.next_step()));  // b's prompt (samples); a's first chunk does not fit the budget of 2
  ASSERT_EQ(s.status(b).state, RequestState::decoding);
  const StepPlan& plan = s.next_step();  // a: chunk [0,2) (no token), b: a decode (samples)
  ASSERT_EQ(plan.prefills.size(), 1u);
  EXPECT_EQ(plan.prefills[0].request, a);
  EXPECT_THROW(s.next_step(), mi::Error);  // previous step not completed
  const std::vector<TokenResult> none;
  const std::vector<TokenResult> for_a{{a, 1}};
  const std::vector<TokenResult> twice{{b, 1}, {b, 2}};
  const std::vector<TokenResult> stranger{{b, 1}, {42, 2}};
  EXPECT_THROW(s.complete_step(none), mi::Error);
  EXPECT_THROW(s.complete_step(for_a), mi::Error);
  EXPECT_THROW(s.complete_step(twice), mi::Error);
  EXPECT_THROW(s.complete_step(stranger), mi::Error);
  EXPECT_EQ(s.status(a).prefilled, 0);  // failed completions change nothing
  EXPECT_EQ(s.status(b).output_ids.size(), 1u);
  EXPECT_NO_THROW(s.complete_step(tokens_for(plan)));
  EXPECT_EQ(s.status(a).prefilled, 2);
  EXPECT_EQ(s.status(b).output_ids.size(), 2u);
}

TEST(Scheduler, ReleaseForgetsOnlyFinishedRequests) {
  Scheduler s(limits(1, 64));
  const int a = s.submit(request(2, 1));
  EXPECT_THROW(s.release(a), mi::Error);  // still waiting
  const StepPlan& plan = s.next_step();
  s.complete_step(tokens_for(plan));
  EXPECT_NO_THROW(s.release(a));
  EXPECT_THROW(s.status(a), mi::Error);
  EXPECT_THROW(s.status(12345), mi::Error);
}

TEST(Scheduler, CancelWaitingRequest) {
  Scheduler s(limits(1, 64));
  const int a = s.submit(request(3, 2)), b = s.submit(request(3, 2));
  s.cancel(b);
  EXPECT_EQ(s.status(b).state, RequestState::finished);
  EXPECT_EQ(s.status(b).finish_reason, FinishReason::cancelled);
  EXPECT_STREQ(mi::runtime::to_string(FinishReason::cancelled), "cancelled");
  EXPECT_EQ(s.waiting(), 1);
  int steps = 0;
  while (s.has_work()) {
    const StepPlan& plan = s.next_step();
    for (const auto& p : plan.prefills) EXPECT_EQ(p.request, a);
    s.complete_step(tokens_for(plan));
    ++steps;
  }
  EXPECT_EQ(steps, 2);  // only a ran
  EXPECT_TRUE(s.status(b).output_ids.empty());
  EXPECT_NO_THROW(s.release(b));
}

TEST(Scheduler, CancelPrefillingAndDecodingRequestsFreesTheirBlocks) {
  SchedulerLimits l = limits(4, 64, 2, 4);
  l.kv_blocks = 4;
  Scheduler s(l);
  const int b = s.submit(request(1, 7));  // 2 blocks, decodes from step 2
  const int a = s.submit(request(6, 2));  // 2 blocks, 3 prefill chunks from step 2 (step 1's budget goes to b)
  const int c = s.submit(request(4, 4));  // 2 blocks: waits
  const StepPlan& p1 = s.next_step();
  EXPECT_EQ(p1.admitted, (std::vector<int>{b, a}));
  s.complete_step(tokens_for(p1));
  const StepPlan& p1b = s.next_step();
  EXPECT_EQ(p1b.decodes, std::vector<int>{b});
  ASSERT_EQ(p1b.prefills.size(), 1u);
  EXPECT_EQ(p1b.prefills[0].request, a);
  s.complete_step(tokens_for(p1b));
  EXPECT_EQ(s.status(a).state, RequestState::prefilling);
  EXPECT_EQ(s.status(b).state, RequestState::decoding);
  EXPECT_EQ(s.free_kv_blocks(), 0);

  s.cancel(a);  // prefilling
  EXPECT_EQ(s.status(a).state, RequestState::finished);
  EXPECT_EQ(s.status(a).finish_reason, FinishReason::cancelled);
  EXPECT_EQ(s.status(a).prefilled, 2);
  EXPECT_EQ(s.free_kv_blocks(), 2);
  EXPECT_EQ(s.running(), 1);
  const StepPlan& p2 = s.next_step();
  EXPECT_EQ(p2.admitted, std::vector<int>{c});  // the freed blocks let c in
  EXPECT_EQ(p2.decodes, std::vector<int>{b});
  ASSERT_EQ(p2.prefills.size(), 1u);
  EXPECT_EQ(p2.prefills[0].request, c);
  s.complete_step(tokens_for(p2));

  s.cancel(b);  // decoding
  EXPECT_EQ(s.status(b).finish_reason, FinishReason::cancelled);
  EXPECT_EQ(s.status(b).output_ids.size(), 3u);  // what it generated is kept
  EXPECT_EQ(s.free_kv_blocks(), 2);
  s.cancel(b);  // finished: no-op
  EXPECT_EQ(s.free_kv_blocks(), 2);
  EXPECT_EQ(s.status(b).finish_reason, FinishReason::cancelled);
  while (s.has_work()) s.complete_step(tokens_for(s.next_step()));
  EXPECT_EQ(s.status(c).finish_reason, FinishReason::length);
  s.cancel(c);  // finished on its own: stays `length`
  EXPECT_EQ(s.status(c).finish_reason, FinishReason::length);
  EXPECT_EQ(s.free_kv_blocks(), 4);
  EXPECT_THROW(s.cancel(99), mi::Error);
}

TEST(Scheduler, CancelWhileAPlanIsOpen) {
  Scheduler s(limits(1, 64));
  const int a = s.submit(request(3, 3)), b = s.submit(request(3, 3));
  const StepPlan& plan = s.next_step();  // a runs, b waits
  EXPECT_THROW(s.cancel(a), mi::Error);  // a is in the open plan
  EXPECT_EQ(s.status(a).state, RequestState::prefilling);
  EXPECT_NO_THROW(s.cancel(b));  // waiting: not in the plan
  EXPECT_EQ(s.status(b).finish_reason, FinishReason::cancelled);
  s.complete_step(tokens_for(plan));
  EXPECT_NO_THROW(s.cancel(a));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.free_kv_blocks(), s.limits().kv_blocks);
}

TEST(Scheduler, AdmissionHookOffsetsTheFirstPrefillChunk) {
  SchedulerLimits l = limits(2, 64, 0, 4);
  l.kv_blocks = 6;
  Scheduler s(l);
  std::vector<int> hooked;
  s.set_admission_hook([&](int id) {
    hooked.push_back(id);
    return id == 0 ? 8 : 0;  // request 0 finds 8 prompt tokens cached
  });
  const int a = s.submit(request(10, 2));  // 12 tokens: 3 blocks
  const int b = s.submit(request(5, 3));   // 8 tokens: 2 blocks
  const int c = s.submit(request(2, 2));   // 1 block: no slot (max_batch 2), no hook call yet
  const StepPlan& p1 = s.next_step();
  EXPECT_EQ(hooked, (std::vector<int>{a, b}));
  EXPECT_EQ(p1.admitted, (std::vector<int>{a, b}));
  EXPECT_EQ(s.status(a).prefilled, 8);
  EXPECT_EQ(s.free_kv_blocks(), 1);  // the whole budget stays reserved
  ASSERT_EQ(p1.prefills.size(), 2u);
  EXPECT_EQ(p1.prefills[0].request, a);
  EXPECT_EQ(p1.prefills[0].first, 8);
  EXPECT_EQ(p1.prefills[0].count, 2);
  EXPECT_TRUE(p1.prefills[0].last);
  EXPECT_EQ(p1.prefills[1].first, 0);
  EXPECT_EQ(p1.prefills[1].count, 5);
  s.complete_step(tokens_for(p1));
  EXPECT_EQ(s.status(a).prefilled, 10);
  EXPECT_EQ(s.status(a).state, RequestState::decoding);
  EXPECT_EQ(s.status(c).state, RequestState::waiting);
  while (s.has_work()) s.complete_step(tokens_for(s.next_step()));
  EXPECT_EQ(hooked, (std::vector<int>{a, b, c}));  // once per admission
}

TEST(Scheduler, ChunkedPrefillAfterTheAdmissionHook) {
  Scheduler s(limits(1, 64, 4, 4));
  s.set_admission_hook([](int) { return 4; });
  const int id = s.submit(request(13, 2));
  std::vector<std::pair<int, int>> chunks;
  while (s.has_work()) {
    const StepPlan& plan = s.next_step();
    for (const auto& p : plan.prefills) {
      chunks.push_back({p.first, p.count});
      EXPECT_EQ(p.last, p.first + p.count == 13);
    }
    s.complete_step(tokens_for(plan));
  }
  EXPECT_EQ(chunks, (std::vector<std::pair<int, int>>{{4, 4}, {8, 4}, {12, 1}}));
  EXPECT_EQ(s.status(id).prefilled, 13);
  EXPECT_EQ(s.status(id).output_ids.size(), 2u);
}

TEST(Scheduler, AdmissionHookOutOfRangeIsAnError) {
  Scheduler s(limits(2, 64));
  int answer = 3;
  s.set_admission_hook([&](int id) { return id == 1 ? answer : 0; });
  const int a = s.submit(request(2, 1));
  const int b = s.submit(request(3, 1));  // the hook answers 3 = the whole prompt: not allowed
  EXPECT_THROW(s.next_step(), mi::Error);
  EXPECT_EQ(s.status(a).state, RequestState::prefilling);  // admitted before b
  EXPECT_EQ(s.status(b).state, RequestState::waiting);
  EXPECT_EQ(s.running(), 1);
  EXPECT_EQ(s.waiting(), 1);
  answer = -1;
  EXPECT_THROW(s.next_step(), mi::Error);
  answer = 2;
  const StepPlan& plan = s.next_step();
  EXPECT_EQ(plan.admitted, std::vector<int>{b});
  ASSERT_EQ(plan.prefills.size(), 2u);  // a is planned too
  EXPECT_EQ(plan.prefills[0].request, a);
  EXPECT_EQ(plan.prefills[1].first, 2);
  EXPECT_EQ(plan.prefills[1].count, 1);
  s.complete_step(tokens_for(plan));
  EXPECT_FALSE(s.has_work());
}

}  // namespace
