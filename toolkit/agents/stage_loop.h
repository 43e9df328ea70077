// One generation stage with LLM implementers, judged by a gate the agents cannot touch, with bounded repair rounds.
//
//   round 0..max_repair_rounds:
//     implementer conversation (the stage objective; from round 1 on, the failing gate's evidence too)
//     [spec reviewer conversation: its report, review/<stage>-r<N>.md, goes to the next round's implementer]
//     require_untampered(): a changed, missing or added protected file ends the stage TAMPERED before any gate runs
//     the gate: PASSED ends the stage; otherwise its evidence is written to reports/<stage>/round-<N>.txt; what the
//       agent-written code it ran changed in the run directory (GateOutcome::violations, undone) is recorded as
//       violations of the run
//   FAILED after the last round.
//
// Only the gate decides PASS or FAIL; an implementer saying it is done only ends its conversation. The stage's
// record (.metainfer/stages/<stage>.json) is rewritten after every round, and a later run_stage in the same run
// directory continues from it (`evolve --resume`): a PASSED or TAMPERED stage is not run again, the judged rounds stay
// spent (resuming never adds repair rounds), and the next round gets the last verdict's evidence.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "agents/agent_run.h"

namespace mi::agents {

struct GateOutcome {
  bool passed = false;
  std::string evidence;  // what failed and why: the output the next round's implementer gets
  // What the agent-written code the gate ran changed in the run directory (gate_watch.h), undone; the gate failed.
  // run_stage records them in the run's violation log.
  std::vector<Violation> violations = {};
};

// Judges the run directory for a stage. Code, not an LLM.
using GateRunner = std::function<GateOutcome(const std::filesystem::path& run_dir, const std::string& stage)>;

// The gate of a protected script: runs gates/<stage>.sh in the run directory with the same isolation as agents'
// commands (no network, the reference trees `hidden` as for them: it builds and runs agent-written code), passing on
// exit status 0; evidence is the status and the output's tail. The run directory's build trees are removed first: the
// gate builds from scratch and never runs what agents' commands left there. The script's run is watched
// (gate_watch.h): a change it made outside the build trees is undone, returned as a violation, and fails the gate; and
// audited (strace, as agents' commands are): a hidden path it or what it calls reached for (a reference tree by a
// path built at run time, a signature file, a record) is returned as a violation and fails the gate too. A missing
// script, or no isolation that confines the file system, is a failure that says so.
GateRunner script_gate(double timeout_s = 600, std::size_t max_evidence_bytes = 16 * 1024,
                       std::vector<std::filesystem::path> hidden = {});

struct StageSpec {
  std::string id;         // also the gate's name
  std::string objective;  // the implementer's task
  int max_repair_rounds = 2;
  bool review = false;    // run the spec reviewer after each implementation round
};

struct StageRound {
  int round = 0;
  std::string implementer, reviewer;  // conversation ids
  std::string gate;                   // "PASSED", "FAILED", "TAMPERED", "NOT_RUN"
  std::string evidence_file;          // relative to the run directory
};

struct StageResult {
  std::string stage;
  std::string state;  // "PASSED" | "FAILED" | "TAMPERED" | "AGENT_ERROR" (the endpoint kept failing)
  std::vector<StageRound> rounds;
  std::string detail;
};

StageResult run_stage(AgentRun& run, const StageSpec& stage, const GateRunner& gate);

}  // namespace mi::agents
