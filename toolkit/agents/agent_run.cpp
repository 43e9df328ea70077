#include "agents/agent_run.h"

#include "agents/isolated_command.h"

namespace mi::agents {

AgentRun::AgentRun(AgentRunConfig config, std::unique_ptr<LlmBackend> backend)
    : config_(std::move(config)), backend_(std::move(backend)), sandbox_(config_.sandbox) {
  if (config_.roles_dir.empty()) config_.roles_dir = config_.sandbox.ckb_dir / "roles";
  metrics_.source_switch = to_string(config_.sandbox.source_switch);
  // Probed lazily elsewhere; recorded here so the summary says how commands were confined on this machine.
  metrics_.isolation = command_isolation().description;
  metrics_.conversations = read_conversation_metrics(run_dir() / "metrics.json");
  earlier_wall_s_ = read_wall_seconds(run_dir() / "metrics.json");
}

ConversationResult AgentRun::converse(const std::string& role_id, const std::string& task, const std::string& conversation_id) {
  const AgentRoleSpec role = find_role(config_.roles_dir, role_id);
  ConversationResult r = run_conversation(*backend_, role, sandbox_, task,
                                          {.id = conversation_id, .max_turns = config_.max_turns, .max_tokens = config_.max_tokens});
  metrics_.conversations.push_back(r.metrics);
  write_records();
  return r;
}

void AgentRun::write_records() {
  metrics_.violations = sandbox_.violations();
  metrics_.reference_accesses = sandbox_.reference_accesses();
  metrics_.wall_s = earlier_wall_s_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  write_run_records(run_dir(), metrics_);
}

}  // namespace mi::agents
