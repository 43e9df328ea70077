// Kernel parameters from the CKB's experience layer: what `metainfer generate --tune` measured before on the same
// kind of CPU (ckb/experience/kernel_tuning.toml, written by record_experience) becomes the starting point of an
// engine generated without --tune, so a host the CKB has seen does not run on the defaults chosen for another one
// (issue 9: "so the next platform starts from knowledge, not from scratch"). The kernels' own defaults were
// measured on one CPU (AMD Zen 4); on AMD Zen 5 the tuner picks L1 prefetches for the decode kernels, 25 % faster
// decode there (experience OPT-029).
//
// A measurement applies to a parameter of the engine when it names the same platform, the same CPU (vendor,
// display family and model: the microarchitecture, not the brand string a VM may invent), the same threads and
// numerics and weight dtype (a measurement without a dtype was timed on bf16 weights), the same op (the objective it
// was timed on: a value chosen on one token plus a batch says nothing about one token alone), and when the tuner itself
// would time the parameter for this engine (the parameter's weight dtypes and numerics). Among those, the last one
// in the file timed at this engine's token count (timing_tokens) wins, else the last one. A parameter the constraints' [tuning] sets keeps that value; a chosen value the platform no longer
// declares is ignored, and so is `chosen = "default"` (no candidate passed its check: it overrides nothing). Entries
// written before the CPU fields were recorded match nothing; a field of the wrong type reads as absent (0 / "").
// Not matched: the model (a measurement on a small, cache-resident model applies to a large one too) and the kernel
// sources' version (a measurement outlives a kernel rewrite): `generate --tune` measures again for both.
// The values describe the generating host: an engine generated here to run on another CPU should set its [tuning].
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"
#include "coverage/coverage.h"
#include "platform/cpu_info.h"

namespace mi::tune {

struct ExperienceTuning {
  std::map<std::string, int> choice;  // parameter -> value taken from a measurement
  nlohmann::json report;              // per parameter: chosen, source (file, date, cpu), the measurement's timings
};

// Reads `experience_file` (missing: nothing applies). mi::Error naming the file for unparsable TOML.
ExperienceTuning experience_tuning(const std::filesystem::path& experience_file, const ckb::Platform& platform,
                                   const coverage::Plan& plan, const platform::CpuInfo& cpu);

// coverage::plan_for(ckb, constraints_file, overrides) with experience_tuning's choices added to the constraints'
// [tuning] (for this host's CPU; nothing when the plan is not covered or its platform is not in the CKB). `report`
// receives the per-parameter report (MANIFEST.json "tuning"); null when nothing applied.
coverage::Plan plan_with_experience(const ckb::Ckb& ckb, const std::filesystem::path& experience_file,
                                    const std::string& constraints_file, const constraints::Overrides& overrides,
                                    nlohmann::json& report);

// plan re-planned with `choice` added to its constraints' [tuning] (over the overrides given): how --tune and the
// experience both hand their values to the generator.
coverage::Plan plan_with_tuning(const ckb::Ckb& ckb, const std::string& constraints_file,
                                const constraints::Overrides& overrides, const coverage::Plan& plan,
                                const std::map<std::string, int>& choice);

// Tokens the tuner times a parameter of operation `op` at: matvec 1, decode the engine's batch (at most the dot
// forms' 8), matmul a prefill of `prefill_tokens`.
int timing_tokens(const coverage::Plan& plan, const std::string& op, int prefill_tokens);

}  // namespace mi::tune
