// The verification report of an engine: each gate, its command, duration, result and evidence, and the final
// state (PASS_VERIFIED or the first failing gate). Written as DIR/reports/verification.json and .md (or into the
// directory `verify --reports-dir` names).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::gates {

struct GateResult {
  std::string id;       // e.g. "L0_provenance", "L1_stage:model_components", "L2_regression:basic_execution"
  std::string level;    // L0 | L1 | L2 | L3 | acceptance | build
  std::string stage;
  bool passed = false;
  std::string summary;  // one line
  std::vector<std::string> commands;
  double duration_s = 0;
  nlohmann::json evidence = nlohmann::json::object();
};

struct Report {
  std::string engine;
  std::string manifest_sha256;
  std::vector<GateResult> gates;
  std::string state;  // "PASS_VERIFIED" or "FAILED:<gate id>"

  bool failed() const;
  nlohmann::json to_json() const;
  std::string to_markdown() const;
  // Writes verification.json and verification.md into `reports_dir` (normally DIR/reports).
  void write(const std::filesystem::path& reports_dir) const;
};

}  // namespace mi::gates
