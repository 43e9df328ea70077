// The gate runner: gates in order, each on the real artefact; a failing gate stops the run and names the stage, the
// command and the evidence (paper Appendix A.1: L0 sources -> build -> L0 binary -> L1 per stage -> acceptance -> L3).
#include "gates/gates.h"

#include <algorithm>

#include "gates/sandbox.h"
#include "common/error.h"
#include "generator/manifest.h"

namespace mi::gates {

double gate_bound(const ckb::Ckb& ckb, const std::string& gate_id, const std::string& key) {
  for (const auto& g : ckb.gates) {
    if (g.id != gate_id) continue;
    const auto it = g.bounds.find(key);
    if (it == g.bounds.end()) fail(g.source.string(), ": gate ", gate_id, ": field 'bounds.", key, "' is missing");
    return it->second;
  }
  fail("ckb/test_contracts: no gate ", gate_id);
}

std::filesystem::path reports_directory(const generator::Engine& engine, const GateOptions& options) {
  return options.reports_dir.empty() ? engine.dir / "reports" : options.reports_dir;
}

std::vector<std::filesystem::path> sandbox_hidden_paths(const GateOptions& options) {
  std::vector<std::filesystem::path> hidden = Sandbox::default_hidden();
  for (const auto& p : options.hidden_paths) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) continue;  // nothing there to hide (and a mount needs its target)
    const auto abs = std::filesystem::absolute(p).lexically_normal();
    if (std::find(hidden.begin(), hidden.end(), abs) == hidden.end()) hidden.push_back(abs);
  }
  return hidden;
}

Report verify_engine(const generator::Engine& engine, const GateOptions& options, const std::string& only) {
  Report report;
  report.engine = engine.name;
  report.manifest_sha256 = generator::sha256_file(engine.dir / "MANIFEST.json");
  // `only` is one gate-id prefix or several separated by commas (an agent-written engine's final gates select
  // everything after L0 sources in one run, so B0 builds once).
  std::vector<std::string> prefixes;
  for (std::size_t at = 0; at <= only.size() && !only.empty();) {
    const std::size_t comma = std::min(only.find(',', at), only.size());
    if (comma > at) prefixes.push_back(only.substr(at, comma - at));
    at = comma + 1;
  }
  auto selected = [&](const std::string& id) {
    if (only.empty()) return true;
    for (const auto& p : prefixes)
      if (id.rfind(p, 0) == 0) return true;
    return false;
  };
  auto record = [&](GateResult g) {
    report.gates.push_back(std::move(g));
    return report.gates.back().passed;
  };

  // The sources first: B0 runs DIR's CMakeLists.txt, so nothing of DIR is built before it is known to be generated.
  bool ok = true;
  if (only.empty() || selected("L0_sources") || !options.allow_modified_sources) ok = record(sources_gate(engine));
  BuildRecord build;
  bool any_stage = false;
  for (const auto& stage : engine.stage_tests) any_stage = any_stage || selected("L1_stage:" + stage);
  if (ok)
    ok = record(options.prebuilt ? prebuilt_build_gate(engine, build, any_stage)
                                 : build_gate(engine, std::max(1, options.threads), build, any_stage));
  if (ok && selected("L0_provenance")) ok = record(provenance_gate(engine, build, options));
  for (const auto& stage : engine.stage_tests)
    if (ok && selected("L1_stage:" + stage)) ok = record(stage_gate(engine, stage, options, build));
  std::string accepted_as = "PASS_VERIFIED";
  if (ok && selected("PASS_VERIFIED")) {
    ok = record(acceptance_gate(engine, options, build));
    accepted_as = report.gates.back().evidence.value("state", "PASS_VERIFIED");
  }
  if (ok && selected("L3_performance")) ok = record(evidence_gate(engine, options, build));

  report.state = accepted_as;
  for (const auto& g : report.gates)
    if (!g.passed) {
      report.state = "FAILED:" + g.id;
      break;
    }
  if (!only.empty() && !report.failed()) report.state = "PASSED:" + only;  // a partial run verifies nothing whole
  report.write(reports_directory(engine, options));
  return report;
}

}  // namespace mi::gates
