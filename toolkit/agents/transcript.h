// One JSONL file per conversation (run_dir/transcripts/<id>.jsonl): every message, tool call, tool result, usage
// report and the end, each a line with its sequence number and seconds since the conversation started. Written and
// flushed line by line, so a run that dies keeps everything up to its last event; the workflow's metrics are
// counted by the runner as events happen, never read back from what an agent says.
#pragma once
#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace mi::agents {

class Transcript {
 public:
  // Creates the file (and its directory); throws mi::Error when it cannot.
  explicit Transcript(const std::filesystem::path& file);

  // Adds "seq" and "t" to `event` and writes it as one line.
  void write(nlohmann::json event);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  long seq_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Reads a transcript back (tests, the summary): one JSON object per line.
std::vector<nlohmann::json> read_transcript(const std::filesystem::path& file);

}  // namespace mi::agents
