// The gates of ckb/test_contracts/gates.toml, each run against the real artefact (the built engine directory).
// The gate runner decides pass or fail from raw outputs; the engine never reports its own verdict.
#pragma once
#include <filesystem>
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
};

// B0: configure and build DIR/build (cmake + ninja). Evidence: build log tail, binary size.
GateResult build_gate(const generator::Engine& engine, int jobs);

// L0: binary reports the manifest hash; every source file listed with matching sha256, none unlisted; no foreign
// inference framework among the binary's dynamic dependencies.
GateResult provenance_gate(const generator::Engine& engine);

// L1 for one stage (its test-contract executable), and L2: every earlier stage again.
GateResult stage_gate(const generator::Engine& engine, const std::string& stage, const GateOptions& options);
GateResult regression_gate(const generator::Engine& engine, const std::vector<std::string>& earlier_stages,
                           const GateOptions& options);

// PASS_VERIFIED: golden greedy traces through the engine as a subprocess, plus authenticity checks.
GateResult acceptance_gate(const generator::Engine& engine, const GateOptions& options);

// L3: peak RSS and a short timing run (recorded, never a pass/fail threshold).
GateResult evidence_gate(const generator::Engine& engine, const GateOptions& options);

// Runs B0, L0, then per stage L1 (+ L2 of the earlier ones), PASS_VERIFIED and L3, stopping at the first failure
// (or only `only` when given: a gate id prefix such as "PASS_VERIFIED"). Writes DIR/reports/.
Report verify_engine(const generator::Engine& engine, const GateOptions& options, const std::string& only = "");

// The dynamic dependencies (DT_NEEDED) of an ELF file; mi::Error if it is not a readable ELF64 file.
std::vector<std::string> elf_needed_libraries(const std::filesystem::path& file);

// Libraries no engine may link (foreign inference frameworks and their runtimes).
const std::vector<std::string>& foreign_framework_deny_list();

}  // namespace mi::gates
