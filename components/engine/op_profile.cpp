// `ENGINE bench --profile`'s tables (engine/op_profile.h): what the measured per-op times mean against the bytes and
// FLOPs each op must move and compute. Model-independent, so it is compiled once into engine_core rather than in the
// model's translation unit.
#include "engine/op_profile.h"

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::engine {
namespace {

using nlohmann::ordered_json;

ordered_json num_or_null(double v, bool ok) { return ok ? ordered_json(v) : ordered_json(nullptr); }

ordered_json table(const std::vector<std::string>& names, const ProfiledPhase& phase, const OpCostModel& cost,
                   const ProfileSettings& ps) {
  const model::OpProfiler& prof = phase.ops;
  const std::vector<profile_detail::Call>& calls = phase.calls;
  const int divide_by = phase.divide_by;
  ordered_json ops = ordered_json::array();
  double op_total = 0, bytes_total = 0, flops_total = 0;
  for (std::size_t i = 0; i < names.size(); ++i) op_total += prof.seconds(int(i));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int op = int(i);
    if (prof.calls(op) == 0) continue;
    bool known = true;
    OpCost c;
    const double per_forward = double(prof.calls(op)) / double(calls.size());  // e.g. layers, or 2 x layers
    for (const profile_detail::Call& f : calls) {
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
    ordered_json row = {{"op", names[i]},
                        {"calls", double(prof.calls(op)) / divide_by},
                        {"ms", s * 1e3},
                        {"share", op_total > 0 ? prof.seconds(op) / op_total : 0.0},
                        {"bytes", num_or_null(c.bytes, known)},
                        {"flops", num_or_null(c.flops, known)},
                        {"gbs", num_or_null(c.bytes / s / 1e9, known && s > 0)},
                        {"gflops", num_or_null(c.flops / s / 1e9, known && s > 0)},
                        {"bound", bounded ? (ps.peak_gflops > 0 && c.flops / (ps.peak_gflops * 1e9) >= bound_s
                                                 ? "compute" : "memory")
                                          : ordered_json(nullptr)},
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
  const double wall = phase.wall_s / divide_by;
  return {{"wall_ms", wall * 1e3},
          {"ops_ms", op_total / divide_by * 1e3},
          {"unattributed_ms", (wall - op_total / divide_by) * 1e3},
          {"bytes", bytes_total},
          {"flops", flops_total},
          {"gbs", bytes_total / wall / 1e9},
          {"gflops", flops_total / wall / 1e9},
          {"ops", ops}};
}

}  // namespace

ordered_json profile_report(const StepProfile& p, const OpCostModel& cost) {
  const ProfileSettings& ps = p.settings;
  return {{"prompt_tokens", p.prompt_tokens},
          {"prefill_chunk", p.prefill_chunk},
          {"decode_steps_averaged", ps.decode_steps},
          {"bandwidth_gbs", num_or_null(ps.bandwidth_gbs, ps.bandwidth_gbs > 0)},
          {"peak_gflops", num_or_null(ps.peak_gflops, ps.peak_gflops > 0)},
          {"bounds_note", ps.bandwidth_gbs > 0 || ps.peak_gflops > 0
                              ? "bound_ms = max(bytes / bandwidth_gbs, flops / peak_gflops) over the bounds given"
                              : "no bounds given (--bandwidth-gbs, --peak-gflops): fractions of bound are null; "
                                "`metainfer bench --profile` passes its measured limits"},
          {"weight_bytes_per_element", cost.weight_bytes},
          {"decode", table(p.names, p.decode, cost, ps)},
          {"prefill", table(p.names, p.prefill, cost, ps)}};
}

ordered_json profile_report(const BatchStepProfile& p, const OpCostModel& cost) {
  ordered_json t = table(p.names, p.steps, cost, p.settings);
  t["batch"] = p.batch;
  t["position"] = p.position;
  t["steps_averaged"] = p.steps.divide_by;
  return t;
}

}  // namespace mi::engine
