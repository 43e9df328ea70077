// `metainfer generate --tune` (issue 9, "profiler-driven kernel selection"): for every kernel parameter the chosen
// platform declares (ckb/platforms/<id>.toml [[tuning]]), compile a timing program once per candidate value (the
// platform's flags plus -D<parameter>=<value>, the kernel level's own sources), check each build against the scalar
// level on the model's actual shapes, time them interleaved on this machine, and keep the fastest that passed (by
// median round; the kernel default unless another value beats it in 4 of 5 rounds: choose_value).
// The choice goes into the constraints ([tuning], so the engine's build defines it and regeneration reproduces it)
// and, with every timing, into MANIFEST.json and the CKB's experience layer (ckb/experience/kernel_tuning.toml).
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"
#include "coverage/coverage.h"

namespace mi::tune {

struct TuneOptions {
  int threads = 1;             // the engine's threads
  int prefill_tokens = 256;    // M of the matmul timing
  // Interleaved rounds over the candidates; each round takes a program's best of `repeats`, and a value is judged by
  // the median of its rounds (so one fast minute of a bimodal host does not decide).
  int rounds = 5;
  int repeats = 3;
  // Decode weights streamed per pass: a decode step's layers and LM head, as many whole layers as fit in this beside
  // the head (at least one layer and the head; a larger model streams from DRAM either way), so a model that fits in
  // the caches is timed in the caches, as it runs.
  double decode_max_bytes = 1536.0 * (1 << 20);
  std::filesystem::path repo_root;              // where components/ is
  std::filesystem::path work_dir;               // empty: a fresh temporary directory (removed afterwards)
};

struct TuneResult {
  std::map<std::string, int> choice;  // parameter -> chosen value
  // per parameter: op, threads, tokens, numerics, dtype, shapes, layers_per_pass (decode), chosen, kept_default (why
  // the default stayed against a lower median, when it did), and per value
  // {ok, runs (seconds per round), seconds (their median, what the choice compares), best_seconds, bytes, flops,
  // weights_gbs or gflops, error}; or {op, chosen: null, skipped} for a parameter not timed.
  nlohmann::json report;
};

// The shapes (rows, cols) a timing pass reads, as the engine's forward dispatches its linear layers (kernel_tuner.cpp
// model_shapes): one decoder layer's groups, the LM head for the decode ops, and how many layers the model has.
struct ModelShapes {
  std::vector<std::pair<int, int>> layer;
  std::optional<std::pair<int, int>> head;
  int layers = 1;
};
ModelShapes model_shapes(const coverage::Plan& plan, const std::string& op);

// A decode (streamed) pass in the proportions of one decode step: the layer's shapes for as many whole layers as fit
// in max_bytes beside the head (at least one, at most the model's), then the head once. (Repeating layers and head
// together, as the tuner once did, made the Qwen3-0.6B head ~90 % of a pass against ~26 % of a step.)
struct StreamedPass {
  std::vector<std::pair<int, int>> shapes;
  int layers = 0;
};
StreamedPass streamed_shapes(const ModelShapes& model, double max_bytes, double element_bytes);

// The median of a value's rounds (the mean of the middle two for an even count); mi::Error for none.
double median(std::vector<double> v);

// Which value to keep, from every passing value's time per round (the rounds are interleaved, so runs[v][i] of all
// values come from the same round i): the lowest median among the default and the values that were faster than the
// default in at least 4 of every 5 rounds (rounded up); `why` says so when the lowest median of all lost that way. A tie inside this host's noise is no reason to change a kernel: on AMD Zen 5 MI_TUNE_MATVEC_ROWS 8 took
// 18.4 ms (median) against 18.8 for the default 4, faster in 3 of 5 rounds, where generated engines decoded 5-9 %
// faster with 4 (experience OPT-034). Where the default did not pass, the lowest median wins. None for no runs.
struct TuningChoice {
  std::optional<int> value;
  std::string why;  // empty, or why the default stayed against a lower median
};
TuningChoice choose_value(const std::map<int, std::vector<double>>& runs, int default_value);

// Why the tuner does not time `param` for this plan, as {explanation, short reason}; both empty when it does. The
// timing program runs bf16 and int8 weights; a parameter is read by the kernels of the weight dtypes it declares
// (ckb/platforms [[tuning]] dtypes, default bf16) and, where it names numerics, of those modes only.
std::pair<std::string, std::string> untimed_reason(const ckb::TuningParameter& param, const coverage::Plan& plan);

// mi::Error when no compiler is found or a candidate fails to build. A candidate that fails its correctness check
// is reported and never chosen; a parameter with no passing candidate keeps the kernels' default (no define).
TuneResult tune_kernels(const ckb::Platform& platform, const coverage::Plan& plan, const TuneOptions& options);

// Appends the result as [[measurement]] entries to `experience_file` (created when missing).
void record_experience(const std::filesystem::path& experience_file, const ckb::Platform& platform,
                       const coverage::Plan& plan, const TuneResult& result);

}  // namespace mi::tune
