#include "agents/run_metrics.h"

#include <fstream>

#include "agents/run_summary.h"
#include "agents/transcript_metrics.h"
#include "common/error.h"

namespace mi::agents {

using nlohmann::json;

json RunMetrics::to_json() const {
  json convs = json::array();
  std::map<std::string, int> calls;
  long messages = 0, edits = 0, added = 0, removed = 0, tin = 0, tout = 0, attempts = 0;
  for (const auto& c : conversations) {
    convs.push_back({{"id", c.id}, {"role", c.role}, {"transcript", c.transcript}, {"stop", c.stop}, {"turns", c.turns},
                     {"messages", c.messages}, {"tool_calls", c.tool_calls}, {"edits", c.edits},
                     {"lines_added", c.lines_added}, {"lines_removed", c.lines_removed}, {"tokens_in", c.tokens_in},
                     {"tokens_out", c.tokens_out}, {"violations", c.violations}, {"http_attempts", c.http_attempts},
                     {"wall_s", c.wall_s}});
    for (const auto& [k, n] : c.tool_calls) calls[k] += n;
    messages += c.messages;
    edits += c.edits;
    added += c.lines_added;
    removed += c.lines_removed;
    tin += c.tokens_in;
    tout += c.tokens_out;
    attempts += c.http_attempts;
  }
  long total_calls = 0;
  for (const auto& [k, n] : calls) total_calls += n;
  json v = json::array();
  for (const auto& x : violations)
    v.push_back({{"role", x.role}, {"tool", x.tool}, {"path", x.path}, {"rule", x.rule}, {"detail", x.detail}});
  json a = json::array();
  for (const auto& x : reference_accesses) a.push_back({{"role", x.role}, {"tool", x.tool}, {"path", x.path}});
  return {{"format", "metainfer-agent-metrics/1"},
          {"source_switch", source_switch},
          {"isolation", isolation},
          {"totals",
           {{"wall_s", wall_s}, {"agents_started", conversations.size()}, {"messages", messages},
            {"tool_calls", total_calls}, {"tool_calls_by_kind", calls}, {"edits", edits},
            {"lines_changed", added + removed}, {"lines_added", added}, {"lines_removed", removed},
            {"tokens_in", tin}, {"tokens_out", tout}, {"violations", violations.size()},
            {"reference_accesses", reference_accesses.size()}, {"http_attempts", attempts}}},
          {"conversations", convs},
          {"violations", v},
          {"reference_accesses", a}};
}

std::vector<ConversationMetrics> read_conversation_metrics(const std::filesystem::path& file) {
  std::vector<ConversationMetrics> out;
  if (!std::filesystem::exists(file)) return out;
  std::ifstream in(file);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || j.value("format", "") != "metainfer-agent-metrics/1" || !j.contains("conversations"))
    fail(file.string(), ": not a metainfer-agent-metrics/1 file");
  try {
    for (const json& c : j["conversations"]) {
      ConversationMetrics m;
      m.id = c.at("id");
      m.role = c.at("role");
      m.transcript = c.at("transcript");
      m.stop = c.at("stop");
      m.turns = c.at("turns");
      m.messages = c.at("messages");
      m.tool_calls = c.at("tool_calls").get<std::map<std::string, int>>();
      m.edits = c.at("edits");
      m.lines_added = c.at("lines_added");
      m.lines_removed = c.at("lines_removed");
      m.tokens_in = c.at("tokens_in");
      m.tokens_out = c.at("tokens_out");
      m.violations = c.at("violations");
      m.http_attempts = c.at("http_attempts");
      m.wall_s = c.at("wall_s");
      out.push_back(m);
    }
  } catch (const json::exception& e) {
    fail(file.string(), ": conversations: ", e.what());
  }
  return out;
}

double read_wall_seconds(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return 0;
  std::ifstream in(file);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("totals") || !j["totals"].contains("wall_s") || !j["totals"]["wall_s"].is_number()) return 0;
  return j["totals"]["wall_s"].get<double>();
}

RunMetrics combine_run_records(const std::filesystem::path& base, const std::vector<std::filesystem::path>& run_dirs) {
  namespace fs = std::filesystem;
  RunMetrics all;
  for (const auto& dir : run_dirs) {
    const fs::path file = dir / "metrics.json";
    // A directory killed in its first conversation has a transcript and no metrics.json yet.
    if (!fs::exists(file) && !fs::is_directory(dir / "transcripts")) continue;
    std::ifstream in(file);
    const json j = json::parse(in, nullptr, false);
    if (!j.is_discarded()) {
      if (all.isolation.empty()) all.isolation = j.value("isolation", "");
      all.source_switch = j.value("source_switch", all.source_switch);
    }
    const std::string prefix = dir.lexically_relative(base).generic_string() + "/";
    std::vector<ConversationMetrics> convs = read_conversation_metrics(file);
    // A directory whose last conversation was killed (and never resumed) still counts it, from its transcript.
    for (auto& c : unrecorded_conversations(dir, convs)) convs.push_back(std::move(c));
    for (auto c : convs) {
      c.transcript = prefix + c.transcript;
      all.conversations.push_back(c);
    }
    all.wall_s += read_wall_seconds(file);
    std::ifstream v(dir / ".metainfer" / "violations.jsonl");
    for (std::string line; std::getline(v, line);) {
      const json x = json::parse(line, nullptr, false);
      if (x.is_object())
        all.violations.push_back({x.value("role", ""), x.value("tool", ""), prefix + x.value("path", ""), x.value("rule", ""), x.value("detail", "")});
    }
    std::ifstream a(dir / ".metainfer" / "reference_access.jsonl");
    for (std::string line; std::getline(a, line);) {
      const json x = json::parse(line, nullptr, false);
      if (x.is_object()) all.reference_accesses.push_back({x.value("role", ""), x.value("tool", ""), x.value("path", "")});
    }
  }
  return all;
}

void write_run_records(const std::filesystem::path& run_dir, const RunMetrics& metrics) {
  {
    std::ofstream out(run_dir / "metrics.json");
    out << metrics.to_json().dump(2) << "\n";
    if (!out) fail((run_dir / "metrics.json").string(), ": cannot write");
  }
  std::ofstream md(run_dir / "summary.md");
  md << render_run_summary(metrics);
  if (!md) fail((run_dir / "summary.md").string(), ": cannot write");
}

}  // namespace mi::agents
