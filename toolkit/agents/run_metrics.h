// The paper's Table 1 figures for a run, measured by the workflow as things happen (never taken from an agent's own
// account): agents started, messages, tool calls by kind, edits, lines changed, tokens in/out (from the endpoint's
// `usage`), violations, wall time. Per conversation and in total; written to run_dir/metrics.json.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/tool_sandbox.h"

namespace mi::agents {

struct ConversationMetrics {
  std::string id, role, transcript;  // transcript: relative to the run directory
  std::string stop;                  // "end_turn", "max_turns", "max_tokens", "error"
  int turns = 0;                     // LLM requests
  int messages = 0;                  // user task + assistant turns + tool results (the system prompt is not one)
  std::map<std::string, int> tool_calls;  // by tool name, refused calls included
  int edits = 0;                     // tool calls that changed a file
  long lines_added = 0, lines_removed = 0;
  long tokens_in = 0, tokens_out = 0;
  int violations = 0;
  int http_attempts = 0;             // requests sent, retries included
  double wall_s = 0;
};

struct RunMetrics {
  std::string source_switch;  // "off" | "on"
  std::string isolation;      // how run_command was isolated
  std::vector<ConversationMetrics> conversations;
  std::vector<Violation> violations;
  std::vector<ReferenceAccess> reference_accesses;
  double wall_s = 0;

  nlohmann::json to_json() const;  // format "metainfer-agent-metrics/1": {totals, conversations, violations, ...}
};

// The conversations of a metrics.json written earlier (a resumed run continues counting from them); none when the
// file does not exist. Throws mi::Error for a file that is not this format.
std::vector<ConversationMetrics> read_conversation_metrics(const std::filesystem::path& metrics_json);
// totals.wall_s of such a file (0 when there is none): the time earlier sessions of a resumed run already spent.
double read_wall_seconds(const std::filesystem::path& metrics_json);

// The records of several run directories as one (an evolution's rounds): conversations with their transcript paths
// made relative to `base`, violations and reference accesses from each directory's .metainfer logs, wall times
// summed. Directories without records are skipped.
RunMetrics combine_run_records(const std::filesystem::path& base, const std::vector<std::filesystem::path>& run_dirs);

// Writes run_dir/metrics.json and run_dir/summary.md.
void write_run_records(const std::filesystem::path& run_dir, const RunMetrics& metrics);

}  // namespace mi::agents
