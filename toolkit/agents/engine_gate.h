// The real gates for agent-written engines: the run directory is an engine directory (laid down by the generator,
// its stage tests and CMakeLists.txt protected), and a stage is judged by `metainfer verify DIR --only
// L1_stage:<stage> --allow-modified-sources`: B0 builds the sources the agents wrote, then the stage's test-contract
// executable must pass. The L0 sources gate is skipped because agent-written sources are, by design, not the
// knowledge generator's output; everything after L1 (acceptance, L3) is a later step of the workflow.
//
// The verifier runs agent-written code (the stage tests link it), so it runs in the same isolation as agents'
// commands: no network, the run directory writable, the toolkit's source tree read-only (the CKB, the gate bounds),
// the protected paths read-only; the host's ccache is readable (CCACHE_READONLY) so unchanged files build fast, and
// nothing the agents' code does can write into it.
#pragma once
#include <filesystem>

#include "agents/stage_loop.h"

namespace mi::agents {

struct EngineGateOptions {
  std::filesystem::path metainfer_binary;  // the verifier to run
  std::filesystem::path source_dir;        // the toolkit's source tree (CKB, gate bounds), mounted read-only
  double timeout_s = 1800;
  std::size_t max_evidence_bytes = 16 * 1024;
};

// The gate for stage ids "basic_execution", "model_components", "framework_integration" (the engine's stage tests).
GateRunner engine_stage_gate(EngineGateOptions options);

}  // namespace mi::agents
