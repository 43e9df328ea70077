// `metainfer agents converse|stage`: the multi-agent workflow's building blocks, run against a real LLM endpoint.
//   converse: one role, one conversation, in a run directory (README "Agents").
//   stage:    the implementer (and optionally the spec reviewer) in repair rounds until the stage's protected gate
//             script gates/<stage>.sh passes, or the rounds run out.
//   protect:  hash a run directory's test contracts and gate scripts, or (--check) verify them before a gate.
//   evolve:   knowledge-base evolution rounds (toolkit/agents/evolution.h) judged by gates/<stage>.sh of --contracts;
//             --resume continues an interrupted one.
// Both write transcripts/, metrics.json and summary.md in the run directory, and print one JSON line last.
// The API key is read from an environment variable (never a flag: flags are visible to every user in ps).
// Exit 0: the conversation ended normally / the stage PASSED; 1: it did not (endpoint error, FAILED, TAMPERED);
// 2: bad input.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agents/agent_run.h"
#include "agents/engine_gate.h"
#include "agents/evolution.h"
#include "agents/protected_files.h"
#include "agents/stage_loop.h"
#include "ckb/ckb.h"
#include "coverage/coverage.h"
#include "cli/commands.h"
#include "common/error.h"

namespace mi::cli {
namespace fs = std::filesystem;

namespace {

struct LlmFlags {
  std::string provider = "openai", url, model, key_env, source_switch = "off", ckb_dir = ckb::default_ckb_dir().string();
  std::string ca_cert, max_tokens_field = "max_tokens";
  std::vector<std::string> references;
  bool stream = false;
  double timeout_s = 300;
  int attempts = 5, max_turns = 40, max_tokens = 4096;
};

void add_llm_flags(CLI::App* cmd, LlmFlags& f) {
  cmd->add_option("--llm", f.provider, "API the endpoint speaks: openai (Chat Completions; vLLM, SGLang, llama.cpp server, OpenAI) or anthropic (Messages)")
      ->check(CLI::IsMember({"openai", "anthropic"}))->capture_default_str();
  cmd->add_option("--llm-url", f.url, "base URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1; $ANTHROPIC_BASE_URL or https://api.anthropic.com)");
  cmd->add_option("--llm-model", f.model, "model name (default: $OPENAI_MODEL / $ANTHROPIC_MODEL)");
  cmd->add_option("--llm-key-env", f.key_env, "environment variable holding the API key (default: OPENAI_API_KEY / ANTHROPIC_API_KEY)");
  cmd->add_flag("--llm-stream", f.stream, "stream responses (SSE)");
  cmd->add_option("--llm-ca-cert", f.ca_cert, "https: trust this PEM CA bundle instead of the system store");
  cmd->add_option("--llm-max-tokens-field", f.max_tokens_field, "openai: max_tokens (local servers) or max_completion_tokens (OpenAI reasoning models)")
      ->check(CLI::IsMember({"max_tokens", "max_completion_tokens"}))->capture_default_str();
  cmd->add_option("--llm-timeout-s", f.timeout_s, "per-request timeout")->capture_default_str();
  cmd->add_option("--llm-attempts", f.attempts, "tries per request (429 and 5xx are retried with backoff)")->capture_default_str();
  cmd->add_option("--max-turns", f.max_turns, "LLM requests per conversation")->capture_default_str();
  cmd->add_option("--max-tokens", f.max_tokens, "output tokens per response")->capture_default_str();
  cmd->add_option("--source-switch", f.source_switch, "off: no agent may read reference sources; on: only the explorer may, logged")
      ->check(CLI::IsMember({"off", "on"}))->capture_default_str();
  cmd->add_option("--reference", f.references, "a reference source tree (repeatable): blocked with the switch off");
  cmd->add_option("--ckb", f.ckb_dir, "CKB directory (roles from its roles/)");
}

agents::BackendConfig backend_config(const LlmFlags& f) {
  agents::BackendConfig bc;
  bc.provider = f.provider;
  bc.base_url = f.url;
  bc.model = f.model;
  if (!f.key_env.empty()) {
    const char* key = std::getenv(f.key_env.c_str());
    if (!key || !*key) fail("--llm-key-env: the environment variable ", f.key_env, " is not set");
    bc.api_key = key;
  }
  bc.stream = f.stream;
  bc.openai_max_tokens_field = f.max_tokens_field;
  bc.http.ca_cert_file = f.ca_cert;
  bc.http.timeout_s = f.timeout_s;
  bc.http.retry.max_attempts = std::max(1, f.attempts);
  return agents::resolve_backend_config(bc);
}

std::unique_ptr<agents::AgentRun> make_run(const LlmFlags& f, const std::string& run_dir) {
  if (!fs::is_directory(run_dir)) fail("--run-dir: '", run_dir, "' is not a directory");
  const agents::BackendConfig bc = backend_config(f);
  agents::AgentRunConfig cfg;
  cfg.sandbox.run_dir = run_dir;
  cfg.sandbox.ckb_dir = f.ckb_dir;
  for (const auto& r : f.references) cfg.sandbox.reference_paths.push_back(r);
  cfg.sandbox.source_switch = agents::parse_source_switch(f.source_switch);
  cfg.max_turns = f.max_turns;
  cfg.max_tokens = f.max_tokens;
  return std::make_unique<agents::AgentRun>(cfg, agents::make_backend(bc));
}

std::string read_text_file(const std::string& flag, const std::string& file) {
  std::ifstream in(file);
  if (!in) fail(flag, ": cannot read '", file, "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

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
    const std::string text = c->task_file.empty() ? c->task : read_text_file("--task-file", c->task_file);
    auto run = make_run(c->llm, c->run_dir);
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
  stage->add_option("--max-repair-rounds", s->rounds, "repair rounds after the first implementation")->capture_default_str();
  stage->add_flag("--review", s->review, "run the spec reviewer after each implementation round");
  stage->add_flag("--engine-gate", s->engine_gate,
                  "the run directory is an engine directory (metainfer generate --no-verify): judge the stage with the real "
                  "gates, metainfer verify --only L1_stage:<stage> --allow-modified-sources");
  stage->add_option("--gate-timeout-s", s->gate_timeout_s, "gate script time limit")->capture_default_str();
  add_llm_flags(stage, s->llm);
  stage->callback([s, &exit_code] {
    if (s->objective.empty() && s->objective_file.empty()) fail("give --objective or --objective-file");
    const std::string objective = s->objective_file.empty() ? s->objective : read_text_file("--objective-file", s->objective_file);
    // A stage without its gate would spend every round's LLM calls for a certain FAILED.
    if (s->engine_gate) {
      if (!fs::is_regular_file(fs::path(s->run_dir) / "MANIFEST.json") ||
          !fs::is_regular_file(fs::path(s->run_dir) / "tests" / ("stage_" + s->stage + "_test.cpp")))
        fail("--engine-gate: ", s->run_dir, " is not an engine directory with the stage test tests/stage_", s->stage, "_test.cpp");
    } else if (!fs::is_regular_file(fs::path(s->run_dir) / "gates" / (s->stage + ".sh"))) {
      fail("--stage ", s->stage, ": the run directory has no gate script gates/", s->stage, ".sh");
    }
    auto run = make_run(s->llm, s->run_dir);
    // The workflow lays the contracts down; a run directory without a manifest gets one now, before any agent acts.
    if (!fs::exists(agents::protected_manifest_path(run->run_dir()))) {
      agents::write_protected_manifest(agents::protected_manifest_path(run->run_dir()),
                                       agents::snapshot_protected(run->run_dir(), agents::default_protected_globs()));
      std::cerr << "metainfer agents: hashed the protected files into " << agents::protected_manifest_path(run->run_dir()).string() << "\n";
    }
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const agents::GateRunner gate = s->engine_gate ? agents::engine_stage_gate({self, ckb::default_repo_root(), s->gate_timeout_s})
                                                   : agents::script_gate(s->gate_timeout_s);
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

  auto* evolve = agents_cmd->add_subcommand("evolve", "Knowledge-base evolution rounds until the SWITCH=OFF regeneration passes and the delta is merged");
  struct EvolveOptions {
    LlmFlags llm;
    std::string work_dir, target, target_file, constraints, model, contracts, stage = "target";
    int rounds = 3, repair_rounds = 1;
    bool resume = false;
    double gate_timeout_s = 600;
  };
  auto e = std::make_shared<EvolveOptions>();
  evolve->add_option("--work-dir", e->work_dir, "where rounds evo-NNN/ and state.json are kept")->required();
  auto* target = evolve->add_option("--target", e->target, "what the CKB lacks and what to build");
  auto* target_file = evolve->add_option("--target-file", e->target_file, "read the target from a file (e.g. plan --json's gaps)");
  auto* constraints = evolve->add_option("--constraints", e->constraints, "a constraints file: evolve only when coverage fails, the gaps are the target");
  auto* model = evolve->add_option("--model", e->model, "the checkpoint (overrides the constraints' model.path)");
  target->excludes(target_file)->excludes(constraints)->excludes(model);
  target_file->excludes(constraints)->excludes(model);
  evolve->add_option("--contracts", e->contracts, "test contracts copied into every run directory, with gates/<stage>.sh")->required();
  evolve->add_option("--stage", e->stage, "the gate judging candidate and regeneration")->capture_default_str();
  evolve->add_option("--max-rounds", e->rounds, "rounds before giving up")->capture_default_str();
  evolve->add_option("--max-repair-rounds", e->repair_rounds, "repair rounds per stage run")->capture_default_str();
  evolve->add_option("--gate-timeout-s", e->gate_timeout_s, "gate script time limit")->capture_default_str();
  evolve->add_flag("--resume", e->resume, "continue the evolution recorded in --work-dir");
  add_llm_flags(evolve, e->llm);
  evolve->callback([e, &exit_code] {
    if (e->target.empty() && e->target_file.empty() && e->constraints.empty() && e->model.empty())
      fail("give --target, --target-file, or --constraints/--model");
    if (!fs::is_regular_file(fs::path(e->contracts) / "gates" / (e->stage + ".sh")))
      fail("--contracts: ", e->contracts, " has no gate script gates/", e->stage, ".sh (the gate of --stage ", e->stage, ")");
    agents::EvolutionConfig cfg;
    cfg.work_dir = e->work_dir;
    fs::create_directories(cfg.work_dir);
    std::string target = e->target_file.empty() ? e->target : read_text_file("--target-file", e->target_file);
    if (!e->constraints.empty() || !e->model.empty()) {
      // Evolution is entered only when coverage fails; the plan's gaps are what the round must learn.
      constraints::Overrides overrides;
      if (!e->model.empty()) overrides.model = e->model;
      const coverage::Plan plan = coverage::plan_for(ckb::load(e->llm.ckb_dir), e->constraints, overrides);
      if (plan.covered) {
        std::cerr << "metainfer agents: the CKB covers these constraints; nothing to evolve (use metainfer generate)\n";
        std::cout << nlohmann::json{{"state", "COVERED"}}.dump() << "\n";
        exit_code = kExitOk;
        return;
      }
      std::ofstream(cfg.work_dir / "plan.json") << plan.to_json().dump(2) << "\n";
      cfg.inputs.push_back(cfg.work_dir / "plan.json");
      const fs::path config_json = plan.constraints.model / "config.json";
      if (fs::is_regular_file(config_json)) cfg.inputs.push_back(config_json);
      target = "Coverage detection found what the knowledge base lacks for these constraints (inputs/plan.json; the "
               "checkpoint's inputs/config.json):\n\n" + plan.to_text();
    }
    cfg.ckb_dir = e->llm.ckb_dir;
    cfg.repo_root = ckb::default_repo_root();
    cfg.contracts_dir = e->contracts;
    cfg.target = target;
    cfg.stage = e->stage;
    for (const auto& r : e->llm.references) cfg.reference_paths.push_back(r);
    cfg.explore_switch = agents::parse_source_switch(e->llm.source_switch);
    cfg.max_rounds = e->rounds;
    cfg.max_repair_rounds = e->repair_rounds;
    cfg.max_turns = e->llm.max_turns;
    cfg.max_tokens = e->llm.max_tokens;
    const agents::BackendConfig bc = backend_config(e->llm);
    agents::make_backend(bc);  // bad flags fail here, before any round is recorded
    const agents::EvolutionResult r =
        agents::evolve(cfg, [bc] { return agents::make_backend(bc); }, agents::script_gate(e->gate_timeout_s), e->resume);
    std::cerr << "metainfer agents: evolution " << r.state << (r.detail.empty() ? "" : " (" + r.detail + ")") << "\n";
    std::cout << nlohmann::json{{"state", r.state}, {"rounds", r.rounds}, {"merged", r.merged_files}, {"detail", r.detail}}.dump() << "\n";
    exit_code = r.state == "ABSORBED" ? kExitOk : kExitFailure;
  });
}

}  // namespace mi::cli
