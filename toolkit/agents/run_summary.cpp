#include "agents/run_summary.h"

#include <cstdio>

#include "agents/run_metrics.h"

namespace mi::agents {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Table cells hold paths and messages: a '|' would split the cell.
std::string cell(std::string s) {
  for (std::size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2) s.replace(at, 1, "\\|");
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

std::string render_run_summary(const RunMetrics& m) {
  const nlohmann::json j = m.to_json();
  const nlohmann::json& t = j["totals"];
  std::string s = "# Agent run summary\n\n";
  s += "Measured by the workflow (tokens as the endpoint reported them in `usage`). Source switch: **" + m.source_switch +
       "**. Commands isolated by: " + m.isolation + ".\n\n";
  s += "| wall time | agents started | messages | tool calls | edits | lines changed | tokens in | tokens out | violations |\n";
  s += "|---|---|---|---|---|---|---|---|---|\n";
  s += "| " + fixed(m.wall_s, 1) + " s | " + t["agents_started"].dump() + " | " + t["messages"].dump() + " | " +
       t["tool_calls"].dump() + " | " + t["edits"].dump() + " | " + t["lines_changed"].dump() + " (+" +
       t["lines_added"].dump() + " -" + t["lines_removed"].dump() + ") | " + t["tokens_in"].dump() + " | " +
       t["tokens_out"].dump() + " | " + t["violations"].dump() + " |\n\n";
  if (!t["tool_calls_by_kind"].empty()) {
    s += "Tool calls by kind:";
    for (const auto& [k, v] : t["tool_calls_by_kind"].items()) s += " " + k + " " + v.dump() + ";";
    s.back() = '\n';
    s += "\n";
  }
  s += "## Conversations\n\n| id | role | stop | turns | messages | tool calls | edits | tokens in/out | violations | wall time | transcript |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : m.conversations) {
    int calls = 0;
    for (const auto& [k, n] : c.tool_calls) calls += n;
    s += "| " + cell(c.id) + " | " + c.role + " | " + cell(c.stop) + " | " + std::to_string(c.turns) + " | " +
         std::to_string(c.messages) + " | " + std::to_string(calls) + " | " + std::to_string(c.edits) + " | " +
         std::to_string(c.tokens_in) + "/" + std::to_string(c.tokens_out) + " | " + std::to_string(c.violations) +
         " | " + fixed(c.wall_s, 1) + " s | `" + cell(c.transcript) + "` |\n";
  }
  s += "\n## Violations\n\n";
  if (m.violations.empty()) s += "None.\n";
  for (const auto& v : m.violations)
    s += "- " + v.role + " `" + v.tool + "` " + (v.path.empty() ? "" : "`" + v.path + "` ") + "(" + v.rule + "): " + v.detail + "\n";
  s += "\n## Reference accesses\n\n";
  if (m.reference_accesses.empty()) s += "None.\n";
  for (const auto& a : m.reference_accesses) s += "- " + a.role + " `" + a.tool + "` `" + a.path + "`\n";
  return s;
}

}  // namespace mi::agents
