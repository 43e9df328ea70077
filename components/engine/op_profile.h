// `ENGINE bench --profile`: where the time of one decode step and of one prefill goes, op by op (the generated
// forward's steps, Model::op_names(), each summed over the layers), beside what the op must move and compute
// (engine/op_cost.h) and, when the machine's bounds are given, the fraction of its bound it reaches:
//   bound_ms = max(bytes / bandwidth, flops / peak) over the bounds given; fraction_of_bound = bound_ms / ms.
// Without --bandwidth-gbs / --peak-gflops the fractions are null: the engine runs no probe of its own.
// "unattributed_ms" is the step's wall time outside every op (argument checks, KV append, the profiler itself).
//
// The measuring loops are templates over the model (they call it); the tables and the report are built in
// op_profile.cpp, compiled once into engine_core for every engine.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.h"
#include "engine/op_cost.h"
#include "model/lm_head.h"
#include "model/op_profiler.h"

namespace mi::engine {

struct ProfileSettings {
  int prompt = 256;       // prefill length, then the decode step at that position
  int decode_steps = 8;   // decode steps averaged (capped by the context left)
  int max_step = 0;       // tokens per prefill forward (the engine's scratch)
  double bandwidth_gbs = 0, peak_gflops = 0;  // 0: unknown
};

namespace profile_detail {

// The table of one profiled phase. forwards: the (start, T, rows) of each forward call the profiler saw.
struct Call {
  int start, T, rows;
  bool batched = false;  // T rows of T different sequences, each one new token at position start (forward_batch)
};

inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace profile_detail

// One profiled phase as measured: the per-op times, the forward calls they were taken over, the phase's wall time
// and what it is averaged over (decode steps; 1 for the prefill).
struct ProfiledPhase {
  model::OpProfiler ops{0};
  std::vector<profile_detail::Call> calls;
  double wall_s = 0;
  int divide_by = 1;
};

// profile_steps' measurement: a prefill of prompt_tokens, then decode steps after it.
struct StepProfile {
  std::vector<std::string> names;  // Model::op_names()
  int prompt_tokens = 0, prefill_chunk = 0;
  ProfileSettings settings;
  ProfiledPhase decode, prefill;
};

// profile_batch_steps' measurement: `steps` batched decode steps of `batch` sequences at `position`.
struct BatchStepProfile {
  std::vector<std::string> names;
  int batch = 0, position = 0;
  ProfileSettings settings;
  ProfiledPhase steps;
};

// The report's "profile" and "profile_batch" objects (op_profile.cpp).
nlohmann::ordered_json profile_report(const StepProfile& p, const OpCostModel& cost);
nlohmann::ordered_json profile_report(const BatchStepProfile& p, const OpCostModel& cost);

// Profiles, on a fresh sequence of `model`: the prefill of ps.prompt ids (in forwards of ps.max_step tokens), then
// ps.decode_steps single-token decode steps (the per-op times averaged over them). mi::Error when the prompt and one
// decode step do not fit the model's context.
template <class M>
StepProfile profile_steps(M& model, const std::vector<int32_t>& prompt, int max_context, ProfileSettings ps) {
  StepProfile out;
  out.names = M::op_names();
  const int P = int(prompt.size());
  if (P < 1 || P + 1 > max_context) fail("--profile-prompt: expected 1..", max_context - 1, ", got ", P);
  ps.decode_steps = std::max(1, std::min(ps.decode_steps, max_context - P));
  const int chunk = std::max(1, ps.max_step);
  out.prompt_tokens = P;
  out.prefill_chunk = chunk;
  out.settings = ps;
  std::vector<float> logits(std::size_t(model.vocab_size()));
  out.prefill.ops = model::OpProfiler(out.names.size());
  out.decode.ops = model::OpProfiler(out.names.size());
  // The prefill and the decode steps on sequence `s`; with `record`, each phase timed under its profiler.
  const auto run = [&](int s, bool record) {
    if (record) model.set_profiler(&out.prefill.ops);
    auto t0 = std::chrono::steady_clock::now();
    for (int first = 0; first < P; first += chunk) {
      const int n = std::min(chunk, P - first);
      model.forward(s, prompt.data() + first, n, logits.data(), false);
      if (record) out.prefill.calls.push_back({first, n, 1});
    }
    if (record) out.prefill.wall_s = profile_detail::since(t0);
    int32_t token = model::greedy_token(logits.data(), model.vocab_size());
    if (record) model.set_profiler(&out.decode.ops);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ps.decode_steps; ++i) {
      model.forward(s, &token, 1, logits.data(), false);
      if (record) out.decode.calls.push_back({P + i, 1, 1});
      token = model::greedy_token(logits.data(), model.vocab_size());
    }
    if (record) out.decode.wall_s = profile_detail::since(t0);
    model.set_profiler(nullptr);
  };
  // One unprofiled pass first, then the measured one on a new sequence. The warm-up pages in what the measured pass
  // will touch: the weights (when the profile is the first thing a process runs, an 8-token prefill measured 1.8 s of
  // page faults, not 0.2 s) and the KV blocks up to the last decode step. A step that opens a block group the process
  // never touched pays for its first touch inside the attention op (experience OPT-033: about 5.5 ms per 3.5 MiB of
  // the 0.6B shape's KV on the Zen 5 VM; a group of 128 positions is 28 MiB of f32, more than a step), and a 256-token
  // prompt puts the first decode step exactly on a group boundary. The cache hands the freed blocks out again (a new
  // sequence starts in the lowest wholly free group: the warm-up's), so the measured pass writes and reads resident
  // memory.
  for (const bool record : {false, true}) {
    const int s = model.new_sequence();
    try {
      run(s, record);
    } catch (...) {
      model.set_profiler(nullptr);
      model.free_sequence(s);
      throw;
    }
    model.free_sequence(s);
  }
  out.decode.divide_by = ps.decode_steps;
  return out;
}

// Profiles `steps` batched decode steps (Model::forward_batch) of the live sequences seqs[0, B), all of length
// `position`, feeding back each row's greedy token; the per-op times are averaged over the steps.
template <class M>
BatchStepProfile profile_batch_steps(M& model, const std::vector<int>& seqs, std::vector<int32_t> tokens, int position,
                                     int steps, const ProfileSettings& ps) {
  BatchStepProfile out;
  out.names = M::op_names();
  const int B = int(seqs.size()), V = model.vocab_size();
  out.batch = B;
  out.position = position;
  out.settings = ps;
  std::vector<float> logits(std::size_t(B) * std::size_t(V));
  out.steps.ops = model::OpProfiler(out.names.size());
  model.set_profiler(&out.steps.ops);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < steps; ++i) {
      model.forward_batch(seqs.data(), tokens.data(), B, logits.data());
      out.steps.calls.push_back({position + i, B, B, true});
      for (int b = 0; b < B; ++b) tokens[std::size_t(b)] = model::greedy_token(logits.data() + std::size_t(b) * V, V);
    }
  } catch (...) {
    model.set_profiler(nullptr);
    throw;
  }
  out.steps.wall_s = profile_detail::since(t0);
  out.steps.divide_by = steps;
  model.set_profiler(nullptr);
  return out;
}

}  // namespace mi::engine
