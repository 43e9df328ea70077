// The gates of ckb/test_contracts/gates.toml, each run against the real artefact (the built engine directory).
// The gate runner decides pass or fail from raw outputs; the engine never reports its own verdict.
#pragma once
#include <filesystem>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "gates/report.h"
#include "generator/generator.h"

namespace mi::gates {

struct GateOptions {
  int threads = 2;                                   // engine threads for acceptance and evidence runs
  std::vector<std::filesystem::path> golden_cases;   // explicit cases; empty = discover under golden_root
  std::filesystem::path golden_root;                 // default: <repo>/tests/data/golden
  std::filesystem::path stage_model;                 // checkpoint for the framework stage (default: the constraints' model)
  // With `only`: build and run a directory whose sources are not the generated ones (tests that plant a defect and
  // investigations). DIR's CMakeLists.txt then runs unchecked; the state is never PASS_VERIFIED.
  bool allow_modified_sources = false;
  // Where the reports go; empty: DIR/reports. The agents' stage gate names a directory outside the engine directory:
  // the verifier runs agent-written code, which must not be able to leave a report where one is looked for.
  std::filesystem::path reports_dir;
  // B0 takes DIR/build as an earlier confined build left it (prebuilt_build_gate) instead of building: the agents'
  // final gates compile agent-written code inside the isolation of agents' commands, then run the later gates here.
  bool prebuilt = false;
  // Paths hidden from the engine under test besides the host's installed reference trees (Sandbox::default_hidden):
  // the agents' reference trees (--reference), which the final gates pass on (`verify --hide`).
  std::vector<std::filesystem::path> hidden_paths;
  // The seed of the acceptance gate's random checkpoints (the perturbed copy, the fresh weights), to replay a run
  // whose evidence reported it (`draw_seed`); unset: fresh entropy every run. Sandbox names stay random either way.
  std::optional<uint64_t> draw_seed;
};

// The paths every gate sandbox of this verification hides: the installed reference trees and options.hidden_paths.
std::vector<std::filesystem::path> sandbox_hidden_paths(const GateOptions& options);

// options.reports_dir, or DIR/reports.
std::filesystem::path reports_directory(const generator::Engine& engine, const GateOptions& options);

// What B0 built: the sha256 of every executable, computed by the gate runner right after the build. Every later
// gate checks an executable against it before running it, so a binary replaced after the build is never run.
struct BuildRecord {
  std::string binary_sha256;                          // DIR/build/<engine>
  std::map<std::string, std::string> executables;     // file name under DIR/build -> sha256 (binary and stages)
};

// "" when DIR/build/<name> hashes to what B0 recorded, else the problem.
std::string check_executable(const generator::Engine& engine, const BuildRecord& record, const std::string& name);

// DIR/plan.json, the coverage plan the engine was generated from (acceptance takes the architecture and max_context
// from it, L3 the context and the model's dimensions), checked against the sha256 MANIFEST.json lists for it: the
// manifest is hashed into the binary (L0 provenance), the plan is not. mi::Error when it is missing, not listed or
// changed. L0 sources checks every file so, but runs only without allow_modified_sources: agent-written engines skip
// it, and their plan must not be what their code rewrote.
nlohmann::json engine_plan(const generator::Engine& engine);

// L0 sources, before B0 builds anything of DIR: no test-only fault in the manifest; every file listed with a matching
// sha256, none unlisted, each byte-identical to what the generator emits now for the manifest's constraints.
GateResult sources_gate(const generator::Engine& engine);

// B0: removes DIR/build, configures and builds it from DIR's sources (cmake + ninja), records the executables'
// sha256 in `record`. Evidence: build log tail, binary size and hash. Without `stage_tests` only the engine binary is
// built (a run that selects no L1 gate, or `metainfer bench`): the stage executables would never run.
GateResult build_gate(const generator::Engine& engine, int jobs, BuildRecord& record, bool stage_tests = true);

// B0 without building (GateOptions::prebuilt): DIR/build is what a build that ran elsewhere left, and nothing of it
// runs any more. Records the executables' sha256 as build_gate does, computed here, so every later gate still runs
// only what was hashed. The build directory and every executable must be themselves, not symlinks: a link made by a
// confined build to a path hidden from it would lead to that path here.
GateResult prebuilt_build_gate(const generator::Engine& engine, BuildRecord& record, bool stage_tests = true);

// L0 provenance, after B0: the binary is the one B0 built and reports the manifest hash (run in the sandbox); no
// foreign inference framework among its dynamic dependencies.
GateResult provenance_gate(const generator::Engine& engine, const BuildRecord& record, const GateOptions& options = {});

// L1 for one stage: its test-contract executable (hash-checked) exits 0 and its GoogleTest JSON report shows every
// test the contract source declares run to completion without a failure (gtest_results.h).
GateResult stage_gate(const generator::Engine& engine, const std::string& stage, const GateOptions& options,
                      const BuildRecord& record);

// PASS_VERIFIED (route hf_trace) or PASS_VERIFIED_ORACLE (route oracle): see acceptance_gate.cpp.
GateResult acceptance_gate(const generator::Engine& engine, const GateOptions& options, const BuildRecord& record);

// L3: TTFT, TPOT and peak RSS measured from outside the engine, compared with the constraints' targets.
GateResult evidence_gate(const generator::Engine& engine, const GateOptions& options, const BuildRecord& record);

// A number of a gate's [gate.bounds] in ckb/test_contracts (mi::Error naming the file and field when missing).
double gate_bound(const ckb::Ckb& ckb, const std::string& gate_id, const std::string& key);

// The bound within which a greedy token counts as a near-tie of the oracle's argmax, for numerics `mode` at logit
// scale `scale`: precise_near_tie, or in fast numerics min(fast_logit_tolerance, fast_logit_tolerance_relative x
// max(1, scale)) (gate PASS_VERIFIED). The acceptance gate and L3 judge greedy ids with it.
double greedy_near_tie(const ckb::Ckb& ckb, const std::string& mode, double scale);

// Runs L0 sources, B0, L0 provenance, the L1 stages, PASS_VERIFIED and L3, stopping at the first failure (or only
// `only` when given: a gate id prefix such as "PASS_VERIFIED", or several separated by commas; B0 always runs). Writes DIR/reports/. The state is PASS_VERIFIED or
// PASS_VERIFIED_ORACLE (the acceptance route), FAILED:<gate>, or PASSED:<only> for a partial run.
Report verify_engine(const generator::Engine& engine, const GateOptions& options, const std::string& only = "");

// The dynamic dependencies (DT_NEEDED) of an ELF file; mi::Error if it is not a readable ELF64 file.
std::vector<std::string> elf_needed_libraries(const std::filesystem::path& file);

// Libraries no engine may link (foreign inference frameworks and their runtimes).
const std::vector<std::string>& foreign_framework_deny_list();

}  // namespace mi::gates
