// `metainfer generate --backend agents`: the staged workflow with LLM roles over an engine directory the knowledge
// generator laid down (CMakeLists.txt, the stage test contracts, plan.json, MANIFEST.json, and the sources drafted
// from the CKB's components). In order:
//   the orchestrator writes strategy/strategy.md (round_strategy.h), which every implementer's task points at;
//   stage by stage, in the CKB's stage order, the stage's own source files are withheld (withheld_sources.h) and the
//   implementers write them until the real L1 stage gate passes (bounded repair rounds, the gate's evidence and the
//   spec reviewer's report fed to the next round; each stage gate also reruns the earlier stages' tests);
//   when every stage passed, the final gates (engine_final_gates: B0 confined, L0 provenance, acceptance, L3), as for
//   the knowledge backend but for the sources check, which agent-written sources fail by design;
//   the experiment summariser writes experiment/summary.md from the figures the workflow measured
//   (experiment_summary.h).
//
// Why a draft at all: B0 builds the whole engine for every stage gate, so the basic_execution gate cannot run before
// the sources of the later stages exist; each stage's draft is removed when that stage starts, so a stage passes only
// on sources its implementer wrote, and the last stage gate reruns every stage's test on them.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "agents/agent_run.h"
#include "agents/engine_gate.h"
#include "agents/stage_loop.h"
#include "ckb/ckb.h"

namespace mi::agents {

// One stage of an engine as the implementer sees it: the stage's contracts (from the CKB) and the engine files
// that implement them (from MANIFEST.json).
struct EngineStageBrief {
  std::string stage;
  std::vector<const ckb::Contract*> contracts;
  std::vector<std::string> files;
  std::string objective;  // the implementer's task text
};

// The engine's stages with test contracts, in the CKB's stage order; mi::Error when the directory is no engine.
std::vector<EngineStageBrief> engine_stage_briefs(const ckb::Ckb& ckb, const std::filesystem::path& engine_dir);

struct EngineGenerationSpec {
  int max_repair_rounds = 2;
  bool review = true;  // the spec reviewer after each implementation round; its report goes to the next round
};

struct EngineGenerationResult {
  // "PASS_VERIFIED" | "PASS_VERIFIED_ORACLE" (the final gates' acceptance route), "FAILED:<stage>",
  // "TAMPERED:<stage>" (a protected file changed before a gate), "AGENT_ERROR:<stage>" (the endpoint kept failing),
  // "TAMPERED:final", or "FAILED:<gate>" from the final gates.
  std::string state;  // also "AGENT_ERROR:strategy" (the endpoint failed the orchestrator)
  std::vector<StageResult> stages;
  FinalGatesOutcome final_gates;
  bool final_gates_ran = false;
  std::string detail;
  std::string strategy, experiment_summary;  // the files the orchestrator and the summariser wrote ("" when none)
};

using FinalGatesRunner = std::function<FinalGatesOutcome(const std::filesystem::path& engine_dir)>;

// Runs the orchestrator, the stages in the engine directory `run` works in (its protected files already hashed), the
// final gates and the experiment summariser. Writes .metainfer/generation.json.
EngineGenerationResult generate_engine_with_agents(AgentRun& run, const std::vector<EngineStageBrief>& stages,
                                                   const EngineGenerationSpec& spec, const GateRunner& stage_gate,
                                                   const FinalGatesRunner& final_gates);

}  // namespace mi::agents
