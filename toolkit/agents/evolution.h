// Knowledge-base evolution (paper section 3 and A.2), as rounds evo-001, evo-002, ... under a work directory:
//
//   strategy     the orchestrator writes the round's strategy/strategy.md (from the second round: updates the
//                previous round's), which the explorer, the consolidator and the candidate's implementer are pointed at
//   explore      the explorer, with the source switch as configured, writes exploration/ notes
//   consolidate  the consolidator (switch OFF) writes ckb_delta/; the delta is staged over a copy of the CKB and
//                must add no lint error
//   candidate    the stage loop (implementer + gate) in the round's candidate run directory, against the staged CKB
//   regenerate   switch OFF, a fresh run directory that holds only the test contracts: the stage loop again, from
//                the staged CKB alone (no notes, no strategy, no earlier sources)
//   merge        only now is the delta consolidated into the CKB (delta_consolidation.h, the path `metainfer agents
//                consolidate` takes too), each file tagged with the round and its gate evidence
//
// A failed phase goes to the failure analyst, whose report seeds the next round's explorer. A phase stopped by the
// endpoint (it kept failing) leaves the round IN_PROGRESS: evolve(resume = true) continues at that phase, keeping
// everything the earlier phases produced. Each round's progress is in evo-NNN/round.json, rewritten after every
// phase; the work directory's state.json names the target, so a resume cannot continue someone else's evolution.
// Run directories laid down from an engine directory lose the sources of the stage under evolution
// (withheld_sources): candidate and regeneration pass only on sources their implementers wrote.
//
// When a call ends the evolution (ABSORBED, or FAILED with the rounds spent), the experiment summariser writes the
// run's summary report, <work>/final/experiment/summary.md, from the figures the workflow measured.
//
// Layout: <work>/state.json, <work>/evo-NNN/{round.json, staged_ckb/, candidate/, regen/}, <work>/final/; candidate/,
// regen/ and final/ are run directories (transcripts, metrics.json, summary.md, reports/); a regeneration that was
// interrupted and restarted keeps its directory as evo-NNN/regen-interrupted-N/, counted in the metrics. Whenever evolve()
// returns, <work>/metrics.json and <work>/summary.md hold every run directory's figures together, and
// <work>/evolution.json each round's state.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/engine_gate.h"
#include "agents/llm_backend.h"
#include "agents/source_switch.h"
#include "agents/stage_loop.h"

namespace mi::agents {

struct EvolutionConfig {
  std::filesystem::path work_dir;
  std::filesystem::path ckb_dir;        // evolved in place when a round is absorbed
  std::filesystem::path repo_root;      // what CKB component and test paths are relative to (lint)
  std::filesystem::path contracts_dir;  // test contracts and gates/<stage>.sh, copied into every run directory
  std::string target;                   // what the CKB lacks and what to build: the explorer's and implementer's brief
  std::vector<std::filesystem::path> inputs;  // files copied into each round's candidate/inputs/ (plan.json, config.json)
  std::string stage = "target";         // the gate that judges candidate and regeneration
  // Removed from every run directory after the contracts are laid down (run-directory relative): the sources of the
  // stage under evolution when the contracts are an engine directory, which the implementers must write.
  std::vector<std::string> withheld_sources;
  std::vector<std::filesystem::path> reference_paths;
  SourceSwitch explore_switch = SourceSwitch::off;
  int max_rounds = 3;
  int max_repair_rounds = 1;
  int max_turns = 40, max_tokens = 4096;
  double command_timeout_s = 600;
  // Asked once a delta is merged, with the merged CKB: does the CKB now cover the target? (`metainfer evolve` with
  // constraints runs coverage again.) It answers {"covered": bool, "gaps": ["<kind> <id>: <what>", ...]}; the answer
  // is recorded in the round ("coverage_after_merge"), the result and the summary. A gap left is reported, not a
  // failure: the plan may lack something no knowledge delta can add (a platform feature, a kernel). Unset: not asked.
  std::function<nlohmann::json(const std::filesystem::path& merged_ckb)> after_merge;
  // The out-of-process check of a SWITCH=OFF regeneration that is a whole engine directory, before its delta may be
  // merged: the stage gate's verdict comes from the stage executable the agents' code is linked into, so it alone
  // cannot be trusted to accept knowledge (`metainfer evolve` runs engine_final_gates: B0 in the isolation of agents'
  // commands, then L0 provenance, acceptance against the reference, L3). Answers {passed, state, evidence}. Unset: not
  // run (script-gated rounds).
  std::function<FinalGatesOutcome(const std::filesystem::path& engine_dir)> final_gates;
};

struct EvolutionResult {
  std::string state;  // "ABSORBED" | "FAILED" (rounds exhausted) | "INTERRUPTED" (resume later)
  std::vector<std::string> rounds;
  std::vector<std::string> merged_files;  // when ABSORBED
  nlohmann::json coverage_after_merge;    // when ABSORBED and after_merge was set; null otherwise
  std::string detail;
  std::string experiment_summary;         // the summariser's report, relative to work_dir ("" when none)
};

// The run directory of the experiment summariser, inside the work directory.
inline constexpr const char* kFinalRunDir = "final";

// A fresh backend per run directory (each holds its own connection settings; tests point it at a scripted server).
using BackendFactory = std::function<std::unique_ptr<LlmBackend>()>;

// mi::Error when one of the two directories lies inside the other: every run directory gets a copy of the contracts,
// so a work directory inside them would hand later rounds copies of earlier rounds' transcripts and exploration notes
// (outside the records the sandbox hides), and contracts inside the work directory would be rewritten by the rounds.
void require_work_dir_apart_from_contracts(const std::filesystem::path& work_dir, const std::filesystem::path& contracts_dir);

// Throws mi::Error for bad configuration (require_work_dir_apart_from_contracts too), a work directory with a
// state.json when resume is false, or none (or one for another target) when resume is true.
EvolutionResult evolve(const EvolutionConfig& config, const BackendFactory& backends, const GateRunner& gate, bool resume);

}  // namespace mi::agents
