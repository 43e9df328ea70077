// `metainfer evolve [constraints.toml] --contracts DIR [LLM flags] [--resume]`: the user-facing entry to knowledge-base
// evolution. Coverage runs first; a covered target says so and exits 0 without a round (unless --force); otherwise
// the plan's gaps are the brief, plan.json and the checkpoint's config.json are each round's inputs, and the rounds
// of toolkit/agents/evolution.h run: the delta reaches the CKB only after the SWITCH=OFF regeneration passes.
// The candidate and the regeneration are judged by the real engine gate (metainfer verify --only L1_stage:<stage>)
// when their run directory is an engine directory (--contracts names one, laid down by `generate --no-verify`; the
// stage's own sources are withheld from both, so their implementers must write them), and by the protected script
// gates/<stage>.sh otherwise.
// `metainfer agents evolve` is the same implementation with a free-text target allowed.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agents/engine_gate.h"
#include "agents/engine_generation.h"
#include "agents/evolution.h"
#include "ckb/ckb.h"
#include "cli/commands.h"
#include "cli/evolve_options.h"
#include "common/error.h"
#include "common/json_file.h"
#include "coverage/coverage.h"

namespace mi::cli {
namespace fs = std::filesystem;

void add_evolve_options(CLI::App* cmd, EvolveOptions& e, bool top_level) {
  if (top_level) {
    cmd->add_option("constraints", e.constraints, "constraints file (TOML); optional when --model is given");
    cmd->add_option("--work-dir", e.work_dir, "where rounds evo-NNN/ and state.json are kept (default: evolution/<checkpoint>)");
    cmd->add_flag("--force", e.force, "evolve even when the CKB covers the constraints");
  } else {
    cmd->add_option("--work-dir", e.work_dir, "where rounds evo-NNN/ and state.json are kept")->required();
    auto* target = cmd->add_option("--target", e.target, "what the CKB lacks and what to build");
    auto* target_file = cmd->add_option("--target-file", e.target_file, "read the target from a file (e.g. plan --json's gaps)");
    auto* constraints = cmd->add_option("--constraints", e.constraints, "a constraints file: evolve only when coverage fails, the gaps are the target");
    target->excludes(target_file)->excludes(constraints);
    target_file->excludes(constraints);
  }
  auto* model = cmd->add_option("--model", e.model, "the checkpoint (overrides the constraints' model.path)");
  if (!top_level) {
    model->excludes("--target")->excludes("--target-file");
  }
  cmd->add_option("--contracts", e.contracts,
                  "test contracts copied into every run directory: gates/<stage>.sh, or an engine directory (generate "
                  "--no-verify) whose stage <stage> is judged by the real L1 gate")
      ->required();
  cmd->add_option("--stage", e.stage, "the gate judging candidate and regeneration (an engine stage for an engine directory)")
      ->capture_default_str();
  cmd->add_option("--max-rounds", e.rounds, "rounds before giving up")->check(whole_number_at_least(1))->capture_default_str();
  cmd->add_option("--max-repair-rounds", e.repair_rounds, "repair rounds per stage run")->check(whole_number_at_least(0))->capture_default_str();
  cmd->add_option("--gate-timeout-s", e.gate_timeout_s, "gate time limit")->check(positive_seconds())->capture_default_str();
  cmd->add_flag("--resume", e.resume, "continue the evolution recorded in --work-dir");
  add_llm_flags(cmd, e.llm);
}

int run_evolve(const EvolveOptions& e) {
  if (e.target.empty() && e.target_file.empty() && e.constraints.empty() && e.model.empty())
    fail("give a constraints file or --model (or, with agents evolve, --target/--target-file)");
  const bool engine_contracts = agents::is_engine_directory(e.contracts, e.stage);
  if (!engine_contracts && !fs::is_regular_file(fs::path(e.contracts) / "gates" / (e.stage + ".sh")))
    fail("--contracts: ", e.contracts, " has no gate script gates/", e.stage, ".sh and is not an engine directory with the stage test tests/stage_",
         e.stage, "_test.cpp (the gate of --stage ", e.stage, ")");
  // Bad LLM flags (no model, no key for a hosted API) fail here, before a work directory or a round is laid down.
  const agents::BackendConfig bc = backend_config(e.llm);
  agents::make_backend(bc);
  agents::EvolutionConfig cfg;
  std::string target = e.target_file.empty() ? e.target : read_flag_file("--target-file", e.target_file);
  std::optional<coverage::Plan> plan;
  constraints::Overrides overrides;
  if (!e.model.empty()) overrides.model = e.model;
  if (!e.constraints.empty() || !e.model.empty()) {
    // Evolution is entered only when coverage fails; the plan's gaps are what the round must learn.
    plan = coverage::plan_for(ckb::load(e.llm.ckb_dir), e.constraints, overrides);
  }
  cfg.work_dir = !e.work_dir.empty() ? fs::path(e.work_dir)
                                     : fs::path("evolution") / (plan ? plan->constraints.model.filename().string() : std::string("target"));
  agents::require_work_dir_apart_from_contracts(cfg.work_dir, e.contracts);  // before anything is written there
  if (plan) {
    if (plan->covered && !e.force) {
      std::cerr << "metainfer evolve: the CKB covers these constraints; nothing to evolve (use metainfer generate, or --force)\n";
      std::cout << nlohmann::json{{"state", "COVERED"}}.dump() << "\n";
      return kExitOk;
    }
    fs::create_directories(cfg.work_dir);
    std::ofstream(cfg.work_dir / "plan.json") << plan->to_json().dump(2) << "\n";
    cfg.inputs.push_back(cfg.work_dir / "plan.json");
    const fs::path config_json = plan->constraints.model / "config.json";
    if (fs::is_regular_file(config_json)) cfg.inputs.push_back(config_json);
    target = plan->covered ? "The knowledge base covers these constraints (inputs/plan.json; the checkpoint's inputs/config.json); "
                             "the evolution was forced. Strengthen what the plan relies on:\n\n" + plan->to_text()
                           : "Coverage detection found what the knowledge base lacks for these constraints (inputs/plan.json; the "
                             "checkpoint's inputs/config.json):\n\n" + plan->to_text();
  }
  fs::create_directories(cfg.work_dir);
  cfg.ckb_dir = e.llm.ckb_dir;
  cfg.repo_root = ckb::default_repo_root();
  cfg.contracts_dir = e.contracts;
  if (engine_contracts) {
    // The stage's own sources are not handed over: candidate and regeneration must write them.
    for (const auto& b : agents::engine_stage_briefs(ckb::load(e.llm.ckb_dir), e.contracts))
      if (b.stage == e.stage) cfg.withheld_sources = b.files;
  }
  cfg.target = target;
  cfg.stage = e.stage;
  for (const auto& r : e.llm.references) cfg.reference_paths.push_back(r);
  cfg.explore_switch = agents::parse_source_switch(e.llm.source_switch);
  cfg.max_rounds = e.rounds;
  cfg.max_repair_rounds = e.repair_rounds;
  cfg.max_turns = e.llm.max_turns;
  cfg.max_tokens = e.llm.max_tokens;
  if (plan) {
    // ABSORBED means the delta passed the gates; whether the CKB now covers the constraints is coverage's call.
    cfg.after_merge = [constraints = e.constraints, overrides](const fs::path& merged_ckb) {
      const coverage::Plan after = coverage::plan_for(ckb::load(merged_ckb), constraints, overrides);
      nlohmann::json gaps = nlohmann::json::array();
      for (const auto& g : after.gaps) gaps.push_back(g.kind + " " + g.id + ": " + g.what);
      return nlohmann::json{{"covered", after.covered}, {"gaps", gaps}};
    };
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const agents::EngineGateOptions gate_options{self, ckb::default_repo_root(), e.gate_timeout_s, 16 * 1024, reference_trees(e.llm)};
  const agents::GateRunner gate = agents::engine_or_script_gate(gate_options, e.gate_timeout_s);
  // An engine-directory round's SWITCH=OFF regeneration is also run from outside (acceptance, L3) before its merge.
  if (engine_contracts)
    cfg.final_gates = [gate_options](const fs::path& engine_dir) {
      // The engine's own thread count (constraints.threads; 0 = every CPU), as `generate` verifies it.
      int threads = read_json_file(engine_dir / "MANIFEST.json").at("constraints").value("threads", 0);
      if (threads <= 0) threads = std::max(1, int(std::thread::hardware_concurrency()));
      return agents::engine_final_gates(gate_options, engine_dir, threads, {});
    };
  const agents::EvolutionResult r = agents::evolve(cfg, [bc] { return agents::make_backend(bc); }, gate, e.resume);
  std::cerr << "metainfer evolve: " << r.state << (r.detail.empty() ? "" : " (" + r.detail + ")") << "; records in "
            << cfg.work_dir.string() << "\n";
  if (!r.coverage_after_merge.is_null())
    std::cerr << "metainfer evolve: " << (r.coverage_after_merge.value("covered", false) ? "the merged CKB covers the constraints"
                                                                                           : "the merged CKB does not yet cover the constraints (gaps left: " +
                                                                                                 r.coverage_after_merge.value("gaps", nlohmann::json::array()).dump() + ")")
              << "\n";
  std::cout << nlohmann::json{{"state", r.state}, {"rounds", r.rounds}, {"merged", r.merged_files}, {"detail", r.detail},
                              {"work_dir", cfg.work_dir.string()}, {"gate", engine_contracts ? "engine" : "script"},
                              {"coverage_after_merge", r.coverage_after_merge},
                              {"experiment_summary", r.experiment_summary.empty() ? nlohmann::json(nullptr)
                                                                                  : nlohmann::json((cfg.work_dir / r.experiment_summary).string())}}.dump()
            << "\n";
  return r.state == "ABSORBED" ? kExitOk : kExitFailure;
}

void register_evolve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("evolve", "Evolve the CKB for constraints it does not cover: LLM rounds, absorbed only after the SWITCH=OFF regeneration passes");
  auto e = std::make_shared<EvolveOptions>();
  add_evolve_options(cmd, *e, true);
  cmd->callback([e, &exit_code] { exit_code = run_evolve(*e); });
}

}  // namespace mi::cli
