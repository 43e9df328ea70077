#include "agents/transcript.h"

#include "common/error.h"

namespace mi::agents {

Transcript::Transcript(const std::filesystem::path& file) : path_(file) {
  std::filesystem::create_directories(file.parent_path());
  out_.open(file, std::ios::trunc);
  if (!out_) fail(file.string(), ": cannot create the transcript");
}

void Transcript::write(nlohmann::json event) {
  event["seq"] = seq_++;
  event["t"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  out_ << event.dump() << "\n";
  out_.flush();
  if (!out_) fail(path_.string(), ": cannot write the transcript");
}

std::vector<nlohmann::json> read_transcript(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) fail(file.string(), ": no transcript");
  std::vector<nlohmann::json> events;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) fail(file.string(), ":", n, ": not JSON");
    events.push_back(std::move(j));
  }
  return events;
}

}  // namespace mi::agents
