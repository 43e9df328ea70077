// Runs one role as one conversation: its own system prompt (from the role file), only its tools, a task message,
// and nothing else. There is no memory shared between conversations: what one role leaves for another is files in
// the run directory. Every tool call goes through the sandbox; the transcript and the metrics are written by this
// runner as the conversation happens.
//
// The loop ends when the model answers without tool calls, after max_turns requests, or on a backend error (the
// endpoint kept failing): the result says which, the transcript ends with an "end" event, and the caller (the
// workflow) decides what follows. An agent's claim of success ends its conversation and nothing else: PASS and FAIL
// come from the gate runner.
#pragma once
#include <string>

#include "agents/agent_role.h"
#include "agents/llm_backend.h"
#include "agents/run_metrics.h"
#include "agents/tool_sandbox.h"

namespace mi::agents {

struct ConversationOptions {
  std::string id;       // transcript name; empty: "<role>-NNN", the next free number in transcripts/
  int max_turns = 40;   // LLM requests
  int max_tokens = 4096;
  // Bound on the history sent with each request (characters of all message texts): above it, the oldest tool
  // results are replaced by a note saying how much was elided (the model can read the file again), so a long
  // conversation stays inside the endpoint's context window. The task and the latest results are never elided.
  std::size_t max_history_chars = 400'000;
};

struct ConversationResult {
  std::string final_text;  // the model's last text
  ConversationMetrics metrics;
};

ConversationResult run_conversation(LlmBackend& backend, const AgentRoleSpec& role, ToolSandbox& sandbox,
                                    const std::string& task, const ConversationOptions& options = {});

}  // namespace mi::agents
