#include "agents/transcript_metrics.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The events of a transcript; a last line that does not parse is the write the process died in, and is dropped.
std::vector<json> read_events(const fs::path& file) {
  std::ifstream in(file);
  if (!in) fail(file.string(), ": cannot read the transcript");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  std::vector<json> events;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    json j = json::parse(lines[i], nullptr, false);
    if (j.is_object()) events.push_back(std::move(j));
    else if (i + 1 < lines.size()) fail(file.string(), ":", i + 1, ": not a JSON event");
  }
  return events;
}

long number(const json& j, const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<long>() : 0; }

}  // namespace

ConversationMetrics metrics_from_transcript(const fs::path& run_dir, const std::string& transcript) {
  const fs::path file = run_dir / transcript;
  ConversationMetrics m;
  m.id = fs::path(transcript).stem().string();
  m.transcript = transcript;
  m.stop = kKilledStop;
  m.messages = 0;
  // The tool calls of the latest assistant turn that have no result yet: the first of them was running.
  std::vector<std::string> pending;
  bool ended = false;
  for (const json& e : read_events(file)) {
    const std::string kind = e.value("kind", "");
    if (e.contains("t") && e["t"].is_number()) m.wall_s = e["t"].get<double>();
    if (kind == "start") {
      m.role = e.value("role", "");
    } else if (kind == "user") {
      ++m.messages;
    } else if (kind == "assistant") {
      ++m.turns;
      ++m.messages;
      if (e.contains("usage") && e["usage"].is_object()) {
        m.tokens_in += number(e["usage"], "input");
        m.tokens_out += number(e["usage"], "output");
      }
      m.http_attempts += int(number(e, "http_attempts"));
      pending.clear();
      if (e.contains("tool_calls") && e["tool_calls"].is_array())
        for (const json& c : e["tool_calls"]) pending.push_back(c.is_object() ? c.value("name", "") : "");
    } else if (kind == "tool_result") {
      ++m.messages;
      ++m.tool_calls[e.value("name", "")];
      m.edits += int(number(e, "edits"));
      m.lines_added += number(e, "lines_added");
      m.lines_removed += number(e, "lines_removed");
      m.violations += int(number(e, "violations"));
      if (!pending.empty()) pending.erase(pending.begin());
    } else if (kind == "error") {
      ++m.turns;  // the request was sent; the endpoint's failure ended the conversation
      pending.clear();
    } else if (kind == "end") {
      ended = true;
      m.stop = e.value("stop", std::string(kKilledStop));
      pending.clear();
    }
  }
  if (!ended && !pending.empty()) ++m.tool_calls[pending.front()];
  return m;
}

std::vector<ConversationMetrics> unrecorded_conversations(const fs::path& run_dir, const std::vector<ConversationMetrics>& recorded) {
  std::set<std::string> known;
  for (const auto& c : recorded) known.insert(c.transcript);
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir / "transcripts", ec))
    if (e.is_regular_file() && e.path().extension() == ".jsonl") {
      const std::string rel = "transcripts/" + e.path().filename().string();
      if (!known.count(rel)) files.push_back(rel);
    }
  std::sort(files.begin(), files.end());
  std::vector<ConversationMetrics> out;
  for (const auto& f : files) out.push_back(metrics_from_transcript(run_dir, f));
  return out;
}

}  // namespace mi::agents
