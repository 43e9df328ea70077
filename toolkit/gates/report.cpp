#include "gates/report.h"

#include <sstream>

#include "generator/manifest.h"

namespace mi::gates {

bool Report::failed() const {
  for (const auto& g : gates)
    if (!g.passed) return true;
  return false;
}

nlohmann::json Report::to_json() const {
  nlohmann::json gates_json = nlohmann::json::array();
  for (const auto& g : gates)
    gates_json.push_back({{"id", g.id}, {"level", g.level}, {"stage", g.stage}, {"passed", g.passed},
                          {"summary", g.summary}, {"commands", g.commands}, {"duration_s", g.duration_s},
                          {"evidence", g.evidence}});
  return {{"format", "metainfer-verification/1"}, {"engine", engine}, {"manifest_sha256", manifest_sha256},
          {"state", state}, {"gates", gates_json}};
}

std::string Report::to_markdown() const {
  std::ostringstream o;
  o << "# Verification of `" << engine << "`\n\n**State: " << state << "**\n\nManifest sha256: `" << manifest_sha256
    << "`\n\n| gate | level | stage | result | seconds | summary |\n|---|---|---|---|---|---|\n";
  for (const auto& g : gates)
    o << "| " << g.id << " | " << g.level << " | " << g.stage << " | " << (g.passed ? "pass" : "**FAIL**") << " | "
      << g.duration_s << " | " << g.summary << " |\n";
  for (const auto& g : gates) {
    o << "\n## " << g.id << (g.passed ? " (pass)" : " (FAIL)") << "\n\n" << g.summary << "\n\n";
    for (const auto& c : g.commands) o << "    " << c << "\n";
    if (!g.evidence.empty()) o << "\n```json\n" << g.evidence.dump(2) << "\n```\n";
  }
  return o.str();
}

void Report::write(const std::filesystem::path& reports_dir) const {
  generator::write_file(reports_dir / "verification.json", to_json().dump(2) + "\n");
  generator::write_file(reports_dir / "verification.md", to_markdown());
}

}  // namespace mi::gates
