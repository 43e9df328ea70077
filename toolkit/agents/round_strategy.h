// The main agent's part of a run (the orchestrator role): before the other roles start, it reads what the workflow
// laid down (the coverage plan, the brief) and writes the round's strategy, strategy/strategy.md, which every later
// role of the round is pointed at. Roles share no memory, so this file is how the plan reaches them. A later round
// starts from the previous round's strategy and the orchestrator updates it.
//
// The orchestrator schedules nothing itself: the workflow code starts the roles and the gate runner in a fixed
// order, and only the gates decide. An orchestrator that writes no strategy leaves the other roles with their tasks
// alone; the strategy is guidance, never a gate.
#pragma once
#include <filesystem>
#include <string>

#include "agents/agent_run.h"

namespace mi::agents {

inline constexpr const char* kStrategyFile = "strategy/strategy.md";

// Starts the orchestrator in `run` with `brief` (what the run is for, its stages or phases, the inputs' paths). Its
// task asks it to write kStrategyFile, or to update the one already there.
ConversationResult plan_strategy(AgentRun& run, const std::string& brief, const std::string& conversation_id = "");

// For another role's task: a paragraph naming the strategy file when the run directory has one, "" otherwise.
std::string strategy_note(const std::filesystem::path& run_dir);

}  // namespace mi::agents
