// The real gates for agent-written engines: the run directory is an engine directory (laid down by the generator,
// its stage tests and CMakeLists.txt protected), and a stage is judged by `metainfer verify DIR --only
// L1_stage:<first>,...,L1_stage:<stage> --allow-modified-sources`: B0 builds the sources the agents wrote, then the
// test-contract executables of the stage and the stages before it must pass. The L0 sources gate is skipped because
// agent-written sources are, by design, not the knowledge generator's output; acceptance and L3 are the final gates
// (engine_final_gates below).
//
// The verifier runs agent-written code (the stage tests link it), so it runs in the same isolation as agents'
// commands: no network, the run directory writable, the toolkit's source tree read-only (the CKB, the gate bounds),
// the protected paths read-only (reports/ included: the verifier writes its reports in the isolation's private /tmp
// and the gate reads the one it prints), the reference trees and files carrying foreign signatures hidden; the host's ccache is readable (CCACHE_READONLY) so unchanged files build fast, and
// nothing the agents' code does can write into it.
// What it changes in the engine directory besides its build tree is judged like an agent's command's changes
// (gate_watch.h): undone, counted as violations, and the gate fails. It runs under the audit of agents' commands
// (strace outside the isolation, command_audit.h), keyed on the verifier's own execve since no shell of ours is
// around it: a hidden path that any process of the run reached for (a stage test's static initializer opening a
// reference tree by a path it built, the compiler following an #include into one) is a violation and fails the gate.
// Only hidden paths are judged, so the verifier's own reads (the engine directory, the toolkit's files, the system)
// never count; without strace the evidence says the run was not audited.
#pragma once
#include <filesystem>
#include <vector>

#include "agents/stage_loop.h"

namespace mi::agents {

struct EngineGateOptions {
  std::filesystem::path metainfer_binary;  // the verifier to run
  std::filesystem::path source_dir;        // the toolkit's source tree (CKB, gate bounds), mounted read-only
  double timeout_s = 1800;
  std::size_t max_evidence_bytes = 16 * 1024;
  // Reference trees (--reference): hidden from the verifier, which runs agent-written code whose output becomes the
  // next round's evidence.
  std::vector<std::filesystem::path> hidden_paths = {};
};

// The gate for stage ids "basic_execution", "model_components", "framework_integration" (the engine's stage tests):
// it runs the test contracts of the stage and of every stage before it (MANIFEST.json order), in one verify run.
GateRunner engine_stage_gate(EngineGateOptions options);

// The files of checkpoint directory `model` the gates mount for agent-written code, by an allow-list: model*.safetensors,
// the shard index and the shards it names, config/generation-config/tokenizer JSON, each JSON only without a foreign
// signature. Never the directory itself, which can hold the checkpoint's own model code (trust_remote_code's
// modeling_*.py) or, for a golden case, the answers (trace.json, logits.safetensors).
std::vector<std::filesystem::path> checkpoint_data_files(const std::filesystem::path& model);

// True when `dir` is an engine directory (MANIFEST.json) carrying the test contract of `stage`
// (tests/stage_<stage>_test.cpp): the real gate can judge it.

bool is_engine_directory(const std::filesystem::path& dir, const std::string& stage);

// engine_stage_gate for a run directory that is an engine directory, the protected script gates/<stage>.sh
// otherwise: decided per call, so one runner serves every run directory of an evolution.
GateRunner engine_or_script_gate(EngineGateOptions options, double script_timeout_s);

// The final gates on an agent-written engine, the knowledge backend's after its sources check (which agent-written
// sources fail by design) and its L1 (the last stage gate ran every stage's test contract on these same sources, and
// no agent acts in between). In two steps:
//   1. B0 rebuilds from scratch in the isolation the stage gate uses (`metainfer verify . --only B0_build`): no
//      network, the engine directory, the system and the read-only ccache visible, the reference trees, the system's
//      foreign sources and the files carrying foreign signatures hidden. An agent-written source that #includes (or
//      .incbin's) a hidden file by its absolute path fails to build; with no isolation that can hide them, nothing
//      runs and the final gates fail.
//   2. On the host, `metainfer verify DIR --only L0_provenance,PASS_VERIFIED,L3 --allow-modified-sources --prebuilt`:
//      B0 only hashes the executables step 1 left (nothing sandboxed runs any more, so none can be swapped after the
//      hashing; symlinks are refused), then provenance, acceptance on the checkpoint in every mode the engine ships,
//      L3 against the targets. These run the engine only inside the gate runner's own bubblewrap sandbox (nested
//      bubblewrap cannot mount /proc, so this verifier cannot run inside the isolation of step 1).
// The stage tests, agent code outside the engine binary, are not among these gates.
struct FinalGatesOutcome {
  bool passed = false;
  std::string acceptance;  // the acceptance route when it passed: "PASS_VERIFIED" | "PASS_VERIFIED_ORACLE"; else ""
  std::string state;       // the verifier's state, e.g. "PASSED:L0_provenance,PASS_VERIFIED,L3" or "FAILED:PASS_VERIFIED"
  std::string evidence;    // every gate's line and each failing gate's evidence
  // What the confined build's processes changed in the engine directory or reached for among the hidden paths
  // (gate_watch.h); B0 failed. The callers record them in the run's violation log.
  std::vector<Violation> violations = {};
};
// golden_cases: as `generate --golden` (empty: the verifier's discovery under tests/data/golden).
FinalGatesOutcome engine_final_gates(const EngineGateOptions& options, const std::filesystem::path& engine_dir, int threads,
                                     const std::vector<std::filesystem::path>& golden_cases = {});

// Where the stage gate's verifier writes its reports: inside the isolation's private /tmp, never in the engine
// directory, whose reports/ is read-only to the agent-written code the gate runs.
inline constexpr const char* kStageGateReportsDir = "/tmp/metainfer-stage-gate-reports";

// The gate prefixes engine_final_gates selects (for the CLI's help and the README).
inline constexpr const char* kAgentFinalGates = "L0_provenance,PASS_VERIFIED,L3";

}  // namespace mi::agents
