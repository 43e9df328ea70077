// `ENGINE bench --profile`: where the time of one decode step and of one prefill goes, op by op (the generated
// forward's steps, Model::op_names(), each summed over the layers), beside what the op must move and compute
// (engine/op_cost.h) and, when the machine's bounds are given, the fraction of its bound it reaches:
//   bound_ms = max(bytes / bandwidth, flops / peak) over the bounds given; fraction_of_bound = bound_ms / ms.
// Without --bandwidth-gbs / --peak-gflops the fractions are null: the engine runs no probe of its own.
// "unattributed_ms" is the step's wall time outside every op (argument checks, KV append, the profiler itself).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

inline nlohmann::ordered_json num_or_null(double v, bool ok) { return ok ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); }

// The table of one profiled phase. forwards: the (start, T, rows) of each forward call the profiler saw.
struct Call {
  int start, T, rows;
  bool batched = false;  // T rows of T different sequences, each one new token at position start (forward_batch)
};

inline nlohmann::ordered_json table(const std::vector<std::string>& names, const model::OpProfiler& prof,
                                    const std::vector<Call>& calls, double wall_s, int divide_by,
                                    const OpCostModel& cost, const ProfileSettings& ps) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  double op_total = 0, bytes_total = 0, flops_total = 0;
  for (std::size_t i = 0; i < names.size(); ++i) op_total += prof.seconds(int(i));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int op = int(i);
    if (prof.calls(op) == 0) continue;
    bool known = true;
    OpCost c;
    const double per_forward = double(prof.calls(op)) / double(calls.size());  // e.g. layers, or 2 x layers
    for (const Call& f : calls) {
      // A batched step's attention is T single-token attentions, each over its own sequence's cache.
      const bool per_row = f.batched && names[i] == "attention";
      OpCost one = cost.per_call(names[i], per_row ? 1 : f.T, f.start, per_row ? 1 : f.rows, &known);
      if (per_row) one.bytes *= f.T, one.flops *= f.T;
      c.bytes += one.bytes * per_forward, c.flops += one.flops * per_forward;
    }
    c.bytes /= divide_by, c.flops /= divide_by;
    const double s = prof.seconds(op) / divide_by;
    bytes_total += c.bytes, flops_total += c.flops;
    double bound_s = 0;
    if (ps.bandwidth_gbs > 0) bound_s = std::max(bound_s, c.bytes / (ps.bandwidth_gbs * 1e9));
    if (ps.peak_gflops > 0) bound_s = std::max(bound_s, c.flops / (ps.peak_gflops * 1e9));
    const bool bounded = known && (ps.bandwidth_gbs > 0 || ps.peak_gflops > 0) && s > 0;
    nlohmann::ordered_json row = {{"op", names[i]},
                                  {"calls", double(prof.calls(op)) / divide_by},
                                  {"ms", s * 1e3},
                                  {"share", op_total > 0 ? prof.seconds(op) / op_total : 0.0},
                                  {"bytes", num_or_null(c.bytes, known)},
                                  {"flops", num_or_null(c.flops, known)},
                                  {"gbs", num_or_null(c.bytes / s / 1e9, known && s > 0)},
                                  {"gflops", num_or_null(c.flops / s / 1e9, known && s > 0)},
                                  {"bound", bounded ? (ps.peak_gflops > 0 && c.flops / (ps.peak_gflops * 1e9) >= bound_s
                                                           ? "compute" : "memory")
                                                    : nlohmann::ordered_json(nullptr)},
                                  {"bound_ms", num_or_null(bound_s * 1e3, bounded)},
                                  {"fraction_of_bound", num_or_null(bound_s / s, bounded)},
                                  {"lost_ms", num_or_null((s - bound_s) * 1e3, bounded)}};
    ops.push_back(row);
  }
  // Largest losses first: time above the op's bound when known, else time.
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    const double la = a["lost_ms"].is_number() ? a["lost_ms"].template get<double>() : a["ms"].template get<double>();
    const double lb = b["lost_ms"].is_number() ? b["lost_ms"].template get<double>() : b["ms"].template get<double>();
    return la > lb;
  });
  const double wall = wall_s / divide_by;
  return {{"wall_ms", wall * 1e3},
          {"ops_ms", op_total / divide_by * 1e3},
          {"unattributed_ms", (wall - op_total / divide_by) * 1e3},
          {"bytes", bytes_total},
          {"flops", flops_total},
          {"gbs", bytes_total / wall / 1e9},
          {"gflops", flops_total / wall / 1e9},
          {"ops", ops}};
}

inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace profile_detail

// Profiles, on a fresh sequence of `model`: the prefill of ps.prompt ids (in forwards of ps.max_step tokens), then
// ps.decode_steps single-token decode steps (the per-op times averaged over them). mi::Error when the prompt and one
// decode step do not fit the model's context.
template <class M>
nlohmann::ordered_json profile_steps(M& model, const OpCostModel& cost, const std::vector<int32_t>& prompt,
                                     int max_context, ProfileSettings ps) {
  using profile_detail::Call;
  const std::vector<std::string> names = M::op_names();
  const int P = int(prompt.size());
  if (P < 1 || P + 1 > max_context) fail("--profile-prompt: expected 1..", max_context - 1, ", got ", P);
  ps.decode_steps = std::max(1, std::min(ps.decode_steps, max_context - P));
  const int chunk = std::max(1, ps.max_step);
  std::vector<float> logits(std::size_t(model.vocab_size()));
  model::OpProfiler prefill(names.size()), decode(names.size());
  const int seq = model.new_sequence();
  try {
    std::vector<Call> prefill_calls, decode_calls;
    model.set_profiler(&prefill);
    auto t0 = std::chrono::steady_clock::now();
    for (int first = 0; first < P; first += chunk) {
      const int n = std::min(chunk, P - first);
      model.forward(seq, prompt.data() + first, n, logits.data(), false);
      prefill_calls.push_back({first, n, 1});
    }
    const double prefill_s = profile_detail::since(t0);
    int32_t token = model::greedy_token(logits.data(), model.vocab_size());
    model.set_profiler(&decode);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ps.decode_steps; ++i) {
      model.forward(seq, &token, 1, logits.data(), false);
      decode_calls.push_back({P + i, 1, 1});
      token = model::greedy_token(logits.data(), model.vocab_size());
    }
    const double decode_s = profile_detail::since(t0);
    model.set_profiler(nullptr);
    model.free_sequence(seq);
    return {{"prompt_tokens", P},
            {"prefill_chunk", chunk},
            {"decode_steps_averaged", ps.decode_steps},
            {"bandwidth_gbs", profile_detail::num_or_null(ps.bandwidth_gbs, ps.bandwidth_gbs > 0)},
            {"peak_gflops", profile_detail::num_or_null(ps.peak_gflops, ps.peak_gflops > 0)},
            {"bounds_note", ps.bandwidth_gbs > 0 || ps.peak_gflops > 0
                                ? "bound_ms = max(bytes / bandwidth_gbs, flops / peak_gflops) over the bounds given"
                                : "no bounds given (--bandwidth-gbs, --peak-gflops): fractions of bound are null; "
                                  "`metainfer bench --profile` passes its measured limits"},
            {"weight_bytes_per_element", cost.weight_bytes},
            {"decode", profile_detail::table(names, decode, decode_calls, decode_s, ps.decode_steps, cost, ps)},
            {"prefill", profile_detail::table(names, prefill, prefill_calls, prefill_s, 1, cost, ps)}};
  } catch (...) {
    model.set_profiler(nullptr);
    model.free_sequence(seq);
    throw;
  }
}

// Profiles `steps` batched decode steps (Model::forward_batch) of the live sequences seqs[0, B), all of length
// `position`, feeding back each row's greedy token; the per-op times are averaged over the steps.
template <class M>
nlohmann::ordered_json profile_batch_steps(M& model, const OpCostModel& cost, const std::vector<int>& seqs,
                                           std::vector<int32_t> tokens, int position, int steps, const ProfileSettings& ps) {
  using profile_detail::Call;
  const std::vector<std::string> names = M::op_names();
  const int B = int(seqs.size()), V = model.vocab_size();
  std::vector<float> logits(std::size_t(B) * std::size_t(V));
  model::OpProfiler prof(names.size());
  std::vector<Call> calls;
  model.set_profiler(&prof);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < steps; ++i) {
      model.forward_batch(seqs.data(), tokens.data(), B, logits.data());
      calls.push_back({position + i, B, B, true});
      for (int b = 0; b < B; ++b) tokens[std::size_t(b)] = model::greedy_token(logits.data() + std::size_t(b) * V, V);
    }
  } catch (...) {
    model.set_profiler(nullptr);
    throw;
  }
  const double wall = profile_detail::since(t0);
  model.set_profiler(nullptr);
  nlohmann::ordered_json t = profile_detail::table(names, prof, calls, wall, steps, cost, ps);
  t["batch"] = B;
  t["position"] = position;
  t["steps_averaged"] = steps;
  return t;
}

}  // namespace mi::engine
