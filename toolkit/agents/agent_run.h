// One agent run: a run directory, one LLM backend, one tool sandbox, the roles from the CKB, and the metrics of
// every conversation started in it. Each converse() starts a fresh conversation for a role (no memory carried
// over: roles communicate through files) and rewrites metrics.json and summary.md afterwards, so an interrupted run
// leaves its records up to the last finished conversation. A run directory that already has records (a resumed
// run) continues them: earlier conversations stay in metrics.json, earlier violations in the sandbox's logs.
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "agents/conversation.h"
#include "agents/llm_backend.h"
#include "agents/run_metrics.h"
#include "agents/tool_sandbox.h"

namespace mi::agents {

struct AgentRunConfig {
  SandboxConfig sandbox;            // run_dir, ckb_dir, reference paths, source switch, limits
  std::filesystem::path roles_dir;  // empty: <ckb_dir>/roles
  int max_turns = 40;
  int max_tokens = 4096;
};

class AgentRun {
 public:
  AgentRun(AgentRunConfig config, std::unique_ptr<LlmBackend> backend);

  ConversationResult converse(const std::string& role_id, const std::string& task, const std::string& conversation_id = "");

  const RunMetrics& metrics() const { return metrics_; }
  ToolSandbox& sandbox() { return sandbox_; }
  // Switches the sandbox for the conversations that follow; the metrics record the switch of the latest phase and
  // each transcript records the switch it ran under.
  void set_source_switch(SourceSwitch s) {
    sandbox_.set_source_switch(s);
    metrics_.source_switch = to_string(s);
  }
  const std::filesystem::path& run_dir() const { return sandbox_.config().run_dir; }
  // Refreshes totals (wall time, violations) and writes metrics.json and summary.md.
  void write_records();

 private:
  AgentRunConfig config_;
  std::unique_ptr<LlmBackend> backend_;
  ToolSandbox sandbox_;
  RunMetrics metrics_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double earlier_wall_s_ = 0;  // spent by earlier sessions of this run directory (a resumed run)
};

}  // namespace mi::agents
