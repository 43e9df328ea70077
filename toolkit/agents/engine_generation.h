// `metainfer generate --backend agents`: the staged workflow with LLM implementers and reviewers over an engine
// directory the knowledge generator laid down (CMakeLists.txt, the stage test contracts, plan.json, MANIFEST.json,
// and the sources drafted from the CKB's components). The implementers own src/: stage by stage, in the CKB's stage
// order, they write and repair the sources that implement the stage's contracts until the real L1 stage gate passes
// (bounded repair rounds, the gate's evidence and the spec reviewer's report fed to the next round; each stage gate
// also reruns the earlier stages' tests). Only when every stage passed do the final gates run (engine_final_gates:
// B0, L0 provenance, acceptance, L3), as for the knowledge backend but for the sources check, which agent-written
// sources fail by design.
//
// Why the draft: B0 builds the whole engine for every stage gate, so the basic_execution gate cannot run before the
// sources of the later stages exist; the draft is what the later stages start from, and what they are judged on is
// the same test contracts either way.
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
  std::string state;
  std::vector<StageResult> stages;
  FinalGatesOutcome final_gates;
  bool final_gates_ran = false;
  std::string detail;
};

using FinalGatesRunner = std::function<FinalGatesOutcome(const std::filesystem::path& engine_dir)>;

// Runs the stages in the engine directory `run` works in (its protected files already hashed), then the final
// gates. Writes strategy/strategy.md (the stage list, for every role) and .metainfer/generation.json.
EngineGenerationResult generate_engine_with_agents(AgentRun& run, const std::vector<EngineStageBrief>& stages,
                                                   const EngineGenerationSpec& spec, const GateRunner& stage_gate,
                                                   const FinalGatesRunner& final_gates);

}  // namespace mi::agents
