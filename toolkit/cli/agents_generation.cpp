#include "cli/agents_generation.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "agents/engine_gate.h"
#include "agents/engine_generation.h"
#include "agents/protected_files.h"
#include "cli/commands.h"

namespace mi::cli {
namespace fs = std::filesystem;

void add_agents_generation_options(CLI::App* cmd, AgentsGenerationOptions& o) {
  add_llm_flags(cmd, o.llm, false);
  cmd->add_option("--max-repair-rounds", o.max_repair_rounds, "--backend agents: repair rounds per stage after the first implementation")
      ->check(whole_number_at_least(0))->capture_default_str();
  cmd->add_flag("--no-review", o.no_review, "--backend agents: no spec reviewer between the implementation rounds");
  cmd->add_option("--gate-timeout-s", o.gate_timeout_s, "--backend agents: time limit of each gate run (build included)")
      ->check(positive_seconds())->capture_default_str();
}

std::vector<std::string> agents_generation_flags_given(const CLI::App* cmd) {
  std::vector<std::string> given = given_llm_flags(cmd);
  for (const char* name : {"--max-repair-rounds", "--no-review", "--gate-timeout-s"})
    if (cmd->count(name) > 0) given.push_back(name);
  return given;
}

int run_agents_generation(const ckb::Ckb& ckb, const coverage::Plan& plan, const generator::Engine& engine,
                          const AgentsGenerationOptions& o, bool json, std::ostream& out) {
  const std::vector<agents::EngineStageBrief> stages = agents::engine_stage_briefs(ckb, engine.dir);
  // The test contracts, CMakeLists.txt and MANIFEST.json as the generator wrote them, hashed before any agent acts;
  // every gate run checks them first.
  agents::write_protected_manifest(agents::protected_manifest_path(engine.dir),
                                   agents::snapshot_protected(engine.dir, agents::default_protected_globs()));
  auto run = make_agent_run(o.llm, engine.dir);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const agents::EngineGateOptions gate_options{self, ckb::default_repo_root(), o.gate_timeout_s, 16 * 1024, reference_trees(o.llm)};
  const int threads = plan.threads;
  if (!json) std::cerr << "metainfer generate --backend agents: " << stages.size() << " stage(s) in " << engine.dir.string() << "\n";
  const agents::EngineGenerationResult r = agents::generate_engine_with_agents(
      *run, stages, {o.max_repair_rounds, !o.no_review}, agents::engine_stage_gate(gate_options),
      [&](const fs::path& dir) {
        return agents::engine_final_gates(gate_options, dir, threads, std::vector<fs::path>(o.golden.begin(), o.golden.end()));
      });
  run->write_records();

  const bool accepted = r.state == "PASS_VERIFIED" || r.state == "PASS_VERIFIED_ORACLE";
  nlohmann::json stage_json = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json rounds = nlohmann::json::array();
    for (const auto& x : s.rounds) rounds.push_back({{"round", x.round}, {"gate", x.gate}, {"evidence", x.evidence_file}});
    stage_json.push_back({{"stage", s.stage}, {"state", s.state}, {"rounds", rounds}});
    if (!json) std::cerr << "  stage " << s.stage << ": " << s.state << " after " << s.rounds.size() << " round(s)\n";
  }
  if (!json) {
    if (r.final_gates_ran) std::cerr << "  final gates (" << agents::kAgentFinalGates << "): " << r.final_gates.state << "\n";
    std::cerr << r.state << "  " << engine.dir.string() << (r.detail.empty() ? "" : "\n  " + r.detail) << "\n  metrics: "
              << (engine.dir / "metrics.json").string() << "\n";
  }
  out << nlohmann::json{{"engine_dir", engine.dir.string()},
                        {"binary", engine.binary.string()},
                        {"backend", "agents"},
                        {"state", r.state},
                        {"stages", stage_json},
                        {"final_gates", r.final_gates_ran ? nlohmann::json{{"selected", agents::kAgentFinalGates},
                                                                          {"state", r.final_gates.state},
                                                                          {"passed", r.final_gates.passed}}
                                                         : nlohmann::json(nullptr)},
                        {"report", (engine.dir / "reports" / "verification.json").string()},
                        {"metrics", (engine.dir / "metrics.json").string()},
                        {"strategy", r.strategy.empty() ? nlohmann::json(nullptr) : nlohmann::json((engine.dir / r.strategy).string())},
                        {"experiment_summary", r.experiment_summary.empty() ? nlohmann::json(nullptr)
                                                                            : nlohmann::json((engine.dir / r.experiment_summary).string())},
                        {"detail", r.detail}}
             .dump()
      << "\n";
  return accepted ? kExitOk : kExitFailure;
}

}  // namespace mi::cli
