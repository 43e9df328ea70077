// `metainfer agents converse|stage`: the multi-agent workflow's building blocks, run against a real LLM endpoint.
//   converse: one role, one conversation, in a run directory (README "Agents").
//   stage:    the implementer (and optionally the spec reviewer) in repair rounds until the stage's protected gate
//             script gates/<stage>.sh passes, or the rounds run out.
//   protect:  hash a run directory's test contracts and gate scripts, or (--check) verify them before a gate.
//   consolidate: merge a CKB delta into the CKB (the path evolve's merge phase takes), for a harness that ran the
//             gates itself (the exported skill's scripts/consolidate.sh).
//   evolve:   knowledge-base evolution rounds (cmd_evolve.cpp, the same implementation as `metainfer evolve`), also
//             with a free-text target; --resume continues an interrupted one.
// Both write transcripts/, metrics.json and summary.md in the run directory, and print one JSON line last.
// The LLM endpoint flags are shared with `generate --backend agents` and `evolve` (llm_flags.h).
// Exit 0: the conversation ended normally / the stage PASSED; 1: it did not (endpoint error, FAILED, TAMPERED);
// 2: bad input.
#include <fstream>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "agents/agent_run.h"
#include "agents/delta_consolidation.h"
#include "agents/engine_gate.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "ckb/ckb.h"
#include "cli/commands.h"
#include "cli/evolve_options.h"
#include "cli/llm_flags.h"
#include "common/error.h"

namespace mi::cli {
namespace fs = std::filesystem;

void register_agents_command(CLI::App& app, int& exit_code) {
  auto* agents_cmd = app.add_subcommand("agents", "LLM agents in separated roles, acting only through the tool sandbox");
  agents_cmd->require_subcommand(1);

  auto* converse = agents_cmd->add_subcommand("converse", "Run one role as one conversation in a run directory");
  struct ConverseOptions {
    LlmFlags llm;
    std::string role, run_dir, task, task_file;
  };
  auto c = std::make_shared<ConverseOptions>();
  converse->add_option("--role", c->role, "role id from the CKB's roles/ (e.g. implementer)")->required();
  converse->add_option("--run-dir", c->run_dir, "the run directory: the agents' whole world")->required();
  auto* task = converse->add_option("--task", c->task, "the task message");
  auto* task_file = converse->add_option("--task-file", c->task_file, "read the task message from a file");
  task->excludes(task_file);
  add_llm_flags(converse, c->llm);
  converse->callback([c, &exit_code] {
    if (c->task.empty() && c->task_file.empty()) fail("give --task or --task-file");
    const std::string text = c->task_file.empty() ? c->task : read_flag_file("--task-file", c->task_file);
    auto run = make_agent_run(c->llm, c->run_dir);
    const agents::ConversationResult r = run->converse(c->role, text);
    const auto& m = r.metrics;
    std::cerr << "metainfer agents: " << m.role << " stopped (" << m.stop << ") after " << m.turns << " turn(s), "
              << m.violations << " violation(s); transcript " << m.transcript << "\n";
    std::cout << nlohmann::json{{"conversation", m.id}, {"role", m.role}, {"stop", m.stop}, {"turns", m.turns},
                                {"violations", m.violations}, {"tokens_in", m.tokens_in}, {"tokens_out", m.tokens_out},
                                {"transcript", m.transcript}, {"final_text", r.final_text}}.dump()
              << "\n";
    exit_code = m.stop == "error" || m.stop == "max_turns" ? kExitFailure : kExitOk;
  });

  auto* stage = agents_cmd->add_subcommand("stage", "Implement one stage in repair rounds until its protected gate script passes");
  struct StageOptions {
    LlmFlags llm;
    std::string run_dir, stage, objective, objective_file;
    int rounds = 2;
    bool review = false, engine_gate = false;
    double gate_timeout_s = 600;
  };
  auto s = std::make_shared<StageOptions>();
  stage->add_option("--run-dir", s->run_dir, "the run directory (holds gates/<stage>.sh and the test contracts)")->required();
  stage->add_option("--stage", s->stage, "stage id; its gate is gates/<stage>.sh")->required();
  auto* obj = stage->add_option("--objective", s->objective, "the stage objective (the implementer's task)");
  auto* obj_file = stage->add_option("--objective-file", s->objective_file, "read the objective from a file");
  obj->excludes(obj_file);
  stage->add_option("--max-repair-rounds", s->rounds, "repair rounds after the first implementation")
      ->check(whole_number_at_least(0))->capture_default_str();
  stage->add_flag("--review", s->review, "run the spec reviewer after each implementation round");
  stage->add_flag("--engine-gate", s->engine_gate,
                  "the run directory is an engine directory (metainfer generate --no-verify): judge the stage with the real "
                  "gates, metainfer verify --only L1_stage:<stage> --allow-modified-sources");
  stage->add_option("--gate-timeout-s", s->gate_timeout_s, "gate script time limit")->check(positive_seconds())->capture_default_str();
  add_llm_flags(stage, s->llm);
  stage->callback([s, &exit_code] {
    if (s->objective.empty() && s->objective_file.empty()) fail("give --objective or --objective-file");
    const std::string objective = s->objective_file.empty() ? s->objective : read_flag_file("--objective-file", s->objective_file);
    // A stage without its gate would spend every round's LLM calls for a certain FAILED.
    if (s->engine_gate) {
      if (!agents::is_engine_directory(s->run_dir, s->stage))
        fail("--engine-gate: ", s->run_dir, " is not an engine directory with the stage test tests/stage_", s->stage, "_test.cpp");
    } else if (!fs::is_regular_file(fs::path(s->run_dir) / "gates" / (s->stage + ".sh"))) {
      fail("--stage ", s->stage, ": the run directory has no gate script gates/", s->stage, ".sh");
    }
    auto run = make_agent_run(s->llm, s->run_dir);
    // The workflow lays the contracts down; a run directory without a manifest gets one now, before any agent acts.
    if (!fs::exists(agents::protected_manifest_path(run->run_dir()))) {
      agents::write_protected_manifest(agents::protected_manifest_path(run->run_dir()),
                                       agents::snapshot_protected(run->run_dir(), agents::default_protected_globs()));
      std::cerr << "metainfer agents: hashed the protected files into " << agents::protected_manifest_path(run->run_dir()).string() << "\n";
    }
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const agents::GateRunner gate =
        s->engine_gate ? agents::engine_stage_gate({self, ckb::default_repo_root(), s->gate_timeout_s, 16 * 1024, reference_trees(s->llm)})
                       : agents::script_gate(s->gate_timeout_s, 16 * 1024, reference_trees(s->llm));
    const agents::StageResult r = agents::run_stage(*run, {s->stage, objective, s->rounds, s->review}, gate);
    nlohmann::json rounds = nlohmann::json::array();
    for (const auto& x : r.rounds) rounds.push_back({{"round", x.round}, {"gate", x.gate}, {"implementer", x.implementer}, {"evidence", x.evidence_file}});
    std::cerr << "metainfer agents: stage " << r.stage << ": " << r.state << (r.detail.empty() ? "" : " (" + r.detail + ")") << "\n";
    std::cout << nlohmann::json{{"stage", r.stage}, {"state", r.state}, {"detail", r.detail}, {"rounds", rounds},
                                {"metrics", (run->run_dir() / "metrics.json").string()}}.dump()
              << "\n";
    exit_code = r.state == "PASSED" ? kExitOk : kExitFailure;
  });

  auto* protect = agents_cmd->add_subcommand("protect", "Hash a run directory's test contracts and gate scripts, or check them (--check)");
  struct ProtectOptions {
    std::string run_dir;
    bool check = false;
  };
  auto p = std::make_shared<ProtectOptions>();
  protect->add_option("--run-dir", p->run_dir, "the run directory")->required();
  protect->add_flag("--check", p->check, "compare with the recorded hashes; exit 1 naming every changed, missing or added file");
  protect->callback([p, &exit_code] {
    if (!fs::is_directory(p->run_dir)) fail("--run-dir: '", p->run_dir, "' is not a directory");
    const fs::path manifest = agents::protected_manifest_path(p->run_dir);
    if (!p->check) {
      const agents::ProtectedManifest m = agents::snapshot_protected(p->run_dir, agents::default_protected_globs());
      agents::write_protected_manifest(manifest, m);
      std::cout << nlohmann::json{{"manifest", manifest.string()}, {"files", m.sha256.size()}}.dump() << "\n";
      return;
    }
    const agents::TamperReport r =
        agents::check_protected(p->run_dir, agents::read_protected_manifest(manifest), agents::default_protected_globs());
    std::cout << nlohmann::json{{"clean", r.clean()}, {"modified", r.modified}, {"missing", r.missing}, {"added", r.added}}.dump() << "\n";
    if (!r.clean()) std::cerr << "metainfer agents: protected files changed: " << r.describe() << "\n";
    exit_code = r.clean() ? kExitOk : kExitFailure;
  });

  auto* consolidate = agents_cmd->add_subcommand(
      "consolidate", "Merge a CKB delta into the CKB (after its SWITCH=OFF regeneration passed the gates), as evolve's merge does");
  struct ConsolidateOptions {
    std::string delta, round, ckb_dir = ckb::default_ckb_dir().string();
    std::vector<std::string> evidence;
  };
  auto k = std::make_shared<ConsolidateOptions>();
  consolidate->add_option("--delta", k->delta, "the delta directory (a run's ckb_delta/: contracts/, families/, experience/, ...)")->required();
  consolidate->add_option("--round", k->round, "the round the delta comes from, e.g. evo-001 (tags every merged file)")->required();
  consolidate->add_option("--evidence", k->evidence, "a gate report that passed on the regeneration from the CKB alone (repeatable)")->required();
  consolidate->add_option("--ckb", k->ckb_dir, "the CKB to merge into")->capture_default_str();
  consolidate->callback([k, &exit_code] {
    if (!fs::is_directory(k->delta)) fail("--delta: '", k->delta, "' is not a directory");
    if (!fs::is_directory(k->ckb_dir)) fail("--ckb: '", k->ckb_dir, "' is not a directory");
    if (k->round.empty() || k->round.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != std::string::npos)
      fail("--round: '", k->round, "' must be letters, digits, '.', '_' or '-' (e.g. evo-001)");
    // Evidence is a verification report (reports/verification.json, format metainfer-verification/1) whose state
    // is a pass: PASS_VERIFIED, PASS_VERIFIED_ORACLE, or PASSED:<gates> for a partial run. Anything else refuses.
    for (const auto& e : k->evidence) {
      if (!fs::is_regular_file(e)) fail("--evidence: '", e, "' is not a file");
      std::ifstream in(e);
      const nlohmann::json report = nlohmann::json::parse(in, nullptr, false);
      if (report.is_discarded() || !report.is_object() || report.value("format", "") != "metainfer-verification/1")
        fail("--evidence: '", e, "' is not a verification report (expected JSON with format metainfer-verification/1, "
             "as `metainfer verify` writes to reports/verification.json)");
      const std::string state = report["state"].is_string() ? report["state"].get<std::string>() : "";
      if (state.rfind("PASS", 0) != 0)
        fail("--evidence: '", e, "' records state '", state, "', not a pass; a delta is merged only on passing gates");
    }
    const agents::Consolidation c = agents::consolidate_delta(k->delta, k->ckb_dir, ckb::default_repo_root(), k->round, k->evidence);
    if (!c.accepted()) std::cerr << "metainfer agents consolidate: refused, nothing merged:\n" << c.describe();
    else std::cerr << "metainfer agents consolidate: merged " << c.merged.size() << " file(s) into " << k->ckb_dir << "\n";
    std::cout << nlohmann::json{{"state", c.accepted() ? "MERGED" : "REFUSED"}, {"merged", c.merged}, {"refused", c.refused},
                                {"lint_errors", c.lint_errors}, {"ckb", k->ckb_dir}}.dump()
              << "\n";
    exit_code = c.accepted() ? kExitOk : kExitFailure;
  });

  auto* evolve = agents_cmd->add_subcommand("evolve", "Knowledge-base evolution rounds until the SWITCH=OFF regeneration passes and the delta is merged");
  auto e = std::make_shared<EvolveOptions>();
  add_evolve_options(evolve, *e, false);
  evolve->callback([e, &exit_code] { exit_code = run_evolve(*e); });
}

}  // namespace mi::cli
