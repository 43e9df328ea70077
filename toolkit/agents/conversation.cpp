#include "agents/conversation.h"

#include <chrono>

#include "agents/tool_catalog.h"
#include "agents/transcript.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string next_id(const fs::path& dir, const std::string& role) {
  for (int n = 1;; ++n) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%03d", n);
    const std::string id = role + "-" + buf;
    if (!fs::exists(dir / (id + ".jsonl"))) return id;
  }
}

json calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const auto& c : calls)
    out.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments.is_null() ? json(c.raw_arguments) : c.arguments}});
  return out;
}

std::size_t history_chars(const ChatRequest& r) {
  std::size_t n = r.system.size();
  for (const Message& m : r.messages) {
    n += m.text.size();
    for (const ToolCall& c : m.tool_calls) n += c.raw_arguments.size() + c.name.size();
  }
  return n;
}

// Elides the oldest tool results until the history fits; the last `keep` tool results stay. Returns how many
// characters were dropped.
std::size_t elide_history(ChatRequest& r, std::size_t limit, std::size_t keep = 2) {
  std::size_t dropped = 0, total = history_chars(r);
  std::vector<Message*> results;
  for (Message& m : r.messages)
    if (m.role == Role::tool) results.push_back(&m);
  for (std::size_t i = 0; total > limit && i + keep < results.size(); ++i) {
    Message& m = *results[i];
    if (m.text.rfind("[elided", 0) == 0) continue;
    const std::string note = "[elided " + std::to_string(m.text.size()) + " characters of an earlier tool result to fit the context; run the tool again if needed]";
    if (note.size() >= m.text.size()) continue;
    dropped += m.text.size() - note.size();
    total -= m.text.size() - note.size();
    m.text = note;
  }
  return dropped;
}

}  // namespace

ConversationResult run_conversation(LlmBackend& backend, const AgentRoleSpec& role, ToolSandbox& sandbox,
                                    const std::string& task, const ConversationOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path run_dir = sandbox.config().run_dir;
  const fs::path dir = run_dir / "transcripts";
  fs::create_directories(dir);
  ConversationResult result;
  ConversationMetrics& m = result.metrics;
  m.id = options.id.empty() ? next_id(dir, role.id) : options.id;
  // A named conversation run again (a resumed stage) keeps the earlier transcript: the new one gets a suffix.
  for (int n = 2; !options.id.empty() && fs::exists(dir / (m.id + ".jsonl")); ++n) m.id = options.id + "-" + std::to_string(n);
  m.role = role.id;
  m.transcript = "transcripts/" + m.id + ".jsonl";
  Transcript transcript(run_dir / m.transcript);
  const std::size_t violations_before = sandbox.violations().size();

  ChatRequest request;
  request.system = role.prompt;
  request.tools = tool_specs(role.tools);
  request.max_tokens = options.max_tokens;
  request.messages.push_back({Role::user, task, {}, "", false});
  m.messages = 1;
  json tool_names = json::array();
  for (const auto& t : request.tools) tool_names.push_back(t.name);
  transcript.write({{"kind", "start"}, {"role", role.id}, {"backend", backend.describe()}, {"tools", tool_names},
                    {"source_switch", to_string(sandbox.config().source_switch)}});
  transcript.write({{"kind", "system"}, {"text", role.prompt}});
  transcript.write({{"kind", "user"}, {"text", task}});

  m.stop = "max_turns";
  while (m.turns < options.max_turns) {
    ++m.turns;
    if (const std::size_t dropped = elide_history(request, options.max_history_chars); dropped > 0)
      transcript.write({{"kind", "elided"}, {"characters", dropped}});
    ChatResponse response;
    try {
      response = backend.chat(request);
    } catch (const std::exception& e) {  // mi::Error, or a response whose JSON has the wrong shape
      const std::string message = dynamic_cast<const Error*>(&e) ? std::string(e.what())
                                                                  : std::string("malformed response from the endpoint: ") + e.what();
      m.stop = "error";
      transcript.write({{"kind", "error"}, {"message", message}});
      result.final_text = message;
      break;
    }
    m.http_attempts += response.http_attempts;
    m.tokens_in += response.usage.input_tokens;
    m.tokens_out += response.usage.output_tokens;
    ++m.messages;
    transcript.write({{"kind", "assistant"}, {"text", response.message.text}, {"tool_calls", calls_json(response.message.tool_calls)},
                      {"stop_reason", response.stop_reason},
                      {"usage", {{"input", response.usage.input_tokens}, {"output", response.usage.output_tokens}}},
                      {"http_attempts", response.http_attempts}});
    result.final_text = response.message.text;
    request.messages.push_back(response.message);
    if (response.message.tool_calls.empty()) {
      m.stop = response.stop_reason.empty() ? "end_turn" : response.stop_reason;
      break;
    }
    for (const ToolCall& call : response.message.tool_calls) {
      ++m.tool_calls[call.name];
      ToolOutcome outcome;
      const std::size_t violations_before_call = sandbox.violations().size();
      if (call.arguments.is_null())
        outcome = {false, false, "error: the arguments are not a JSON object: " + call.raw_arguments.substr(0, 200)};
      else
        outcome = sandbox.call(role, call.name, call.arguments);
      if (outcome.edits > 0) {
        m.edits += outcome.edits;
        m.lines_added += outcome.lines_added;
        m.lines_removed += outcome.lines_removed;
      }
      // The counts go into the transcript too: it is what a killed conversation's figures are counted back from
      // (transcript_metrics.h).
      transcript.write({{"kind", "tool_result"}, {"id", call.id}, {"name", call.name}, {"ok", outcome.ok},
                        {"violation", outcome.violation}, {"violations", sandbox.violations().size() - violations_before_call},
                        {"edits", outcome.edits}, {"lines_added", outcome.lines_added}, {"lines_removed", outcome.lines_removed},
                        {"output", outcome.output}});
      request.messages.push_back({Role::tool, outcome.output, {}, call.id, !outcome.ok});
      ++m.messages;
    }
  }
  m.violations = int(sandbox.violations().size() - violations_before);
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  transcript.write({{"kind", "end"}, {"stop", m.stop}, {"turns", m.turns}, {"violations", m.violations},
                    {"tokens_in", m.tokens_in}, {"tokens_out", m.tokens_out}});
  return result;
}

}  // namespace mi::agents
