#include "agents/agent_run.h"

#include "agents/isolated_command.h"
#include "agents/transcript_metrics.h"

namespace mi::agents {

AgentRun::AgentRun(AgentRunConfig config, std::unique_ptr<LlmBackend> backend)
    : config_(std::move(config)), backend_(std::move(backend)), sandbox_(config_.sandbox) {
  if (config_.roles_dir.empty()) config_.roles_dir = config_.sandbox.ckb_dir / "roles";
  metrics_.source_switch = to_string(config_.sandbox.source_switch);
  // Probed lazily elsewhere; recorded here so the summary says how commands were confined on this machine.
  metrics_.isolation = command_isolation().description;
  metrics_.conversations = read_conversation_metrics(run_dir() / "metrics.json");
  // Conversations an earlier session started but never finished (it was killed): counted from their transcripts.
  for (auto& c : unrecorded_conversations(run_dir(), metrics_.conversations)) metrics_.conversations.push_back(std::move(c));
  earlier_wall_s_ = read_wall_seconds(run_dir() / "metrics.json");
}

ConversationResult AgentRun::converse(const std::string& role_id, const std::string& task, const std::string& conversation_id) {
  const AgentRoleSpec role = find_role(config_.roles_dir, role_id);
  ConversationResult r;
  try {
    r = run_conversation(*backend_, role, sandbox_, task,
                         {.id = conversation_id, .max_turns = config_.max_turns, .max_tokens = config_.max_tokens});
  } catch (...) {
    // The conversation did not end normally, but it was started and may have spent tokens and changed files: its
    // transcript says how much, and the records say it before the error goes on.
    for (auto& c : unrecorded_conversations(run_dir(), metrics_.conversations)) metrics_.conversations.push_back(std::move(c));
    write_records();
    throw;
  }
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
