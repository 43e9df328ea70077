// The experiment summariser's part of a run: when the run is over, it writes the run's summary report,
// experiment/summary.md, for a person to read: what was attempted, what the gates decided, where the rounds, edits
// and tokens went, and what is worth keeping as experience.
//
// The figures stay the workflow's: its task carries the metrics the workflow measured (the same tables as
// summary.md, rendered by our code) and the gates' outcome as the workflow recorded it; metrics.json, summary.md and
// the gate reports are workflow records that no agent may write, so the report can quote the figures and never
// change them. Its own conversation is measured and counted like every other.
#pragma once
#include <string>

#include "agents/agent_run.h"
#include "agents/run_metrics.h"

namespace mi::agents {

inline constexpr const char* kExperimentSummaryFile = "experiment/summary.md";

// Starts the experiment summariser in `run`. `outcome`: the run's result as the workflow recorded it (state, stages
// or rounds with their gates); `measured`: the figures to report (the run's own, or an evolution's across rounds).
ConversationResult summarise_experiment(AgentRun& run, const std::string& outcome, const RunMetrics& measured);

}  // namespace mi::agents
