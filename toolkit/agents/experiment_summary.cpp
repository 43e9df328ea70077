#include "agents/experiment_summary.h"

#include "agents/run_summary.h"

namespace mi::agents {

ConversationResult summarise_experiment(AgentRun& run, const std::string& outcome, const RunMetrics& measured) {
  std::string task = "The run is over. Write its summary report to " + std::string(kExperimentSummaryFile) + ".\n\n";
  task += "Outcome, as the workflow recorded it (only the gates decide PASS or FAIL):\n\n" + outcome + "\n\n";
  task += "Figures measured by the workflow (quote them; never estimate or change them):\n\n" + render_run_summary(measured);
  return run.converse("experiment_summariser", task, "experiment-summariser");
}

}  // namespace mi::agents
