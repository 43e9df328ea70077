#include "agents/round_strategy.h"

namespace mi::agents {
namespace fs = std::filesystem;

ConversationResult plan_strategy(AgentRun& run, const std::string& brief, const std::string& conversation_id) {
  const bool update = fs::is_regular_file(run.run_dir() / kStrategyFile);
  std::string task = brief + "\n\n";
  task += update ? std::string("The previous round's strategy is in ") + kStrategyFile +
                       ": read it and update it for this round (what failed, what changes)."
                 : std::string("Write the strategy to ") + kStrategyFile + ".";
  task += " The other roles read it first; they see nothing else of yours.";
  return run.converse("orchestrator", task, conversation_id);
}

std::string strategy_note(const fs::path& run_dir) {
  if (!fs::is_regular_file(run_dir / kStrategyFile)) return "";
  return std::string("\n\nThe main agent's strategy for this run is ") + kStrategyFile + ": read it first.";
}

}  // namespace mi::agents
