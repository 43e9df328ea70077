#include "agents/evolution.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agents/agent_run.h"
#include "agents/ckb_delta.h"
#include "agents/command_paths.h"
#include "agents/delta_consolidation.h"
#include "agents/experiment_summary.h"
#include "agents/protected_files.h"
#include "agents/round_strategy.h"
#include "agents/run_metrics.h"
#include "agents/withheld_sources.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kPhases = {"strategy", "explore", "consolidate", "candidate", "regenerate", "merge"};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_json(const fs::path& p, const json& j) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) fail(p.string(), ": cannot write");
}

std::string round_name(int n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "evo-%03d", n);
  return buf;
}

// A run directory as the workflow lays it down: the test contracts copied in and hashed before any agent acts. An
// engine directory as contracts brings its sources and test contracts, never its build or another run's records,
// and never the sources of the stage under evolution (`withheld`): the implementer writes those.
void lay_down_contracts(const fs::path& run_dir, const fs::path& contracts_dir, const std::vector<std::string>& withheld) {
  fs::create_directories(run_dir);
  if (!contracts_dir.empty())
    for (const auto& e : fs::directory_iterator(contracts_dir)) {
      const std::string name = e.path().filename().string();
      if (name == "build" || name == "reports" || name == ".metainfer" || name == "transcripts" || name == "metrics.json" ||
          name == "summary.md" || name == "strategy" || name == "experiment")
        continue;
      fs::copy(e.path(), run_dir / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    }
  withhold_sources(run_dir, withheld);
  write_protected_manifest(protected_manifest_path(run_dir), snapshot_protected(run_dir, default_protected_globs()));
}

// Whether the delta under `a` and the one under `b` hold the same files with the same bytes (a delta that can no
// longer be read as one, a symlink in it say, differs).
bool same_delta(const fs::path& a, const fs::path& b) {
  try {
    const std::vector<std::string> files = delta_files(a);
    if (files != delta_files(b)) return false;
    for (const auto& f : files)
      if (read_all(a / f) != read_all(b / f)) return false;
    return true;
  } catch (const Error&) {
    return false;
  }
}

class Round {
 public:
  Round(const EvolutionConfig& cfg, const BackendFactory& backends, const GateRunner& gate, fs::path dir)
      : cfg_(cfg), backends_(backends), gate_(gate), dir_(std::move(dir)), record_(json::parse(read_all(dir_ / "round.json"))) {}

  // Runs the phases left; returns the round's state ("ABSORBED", "FAILED:<phase>", or "IN_PROGRESS" when the
  // endpoint stopped it).
  std::string run(std::vector<std::string>& merged) {
    while (record_["state"] == "IN_PROGRESS") {
      const std::string phase = record_["phase"];
      std::string outcome;  // "" next phase; "interrupted"; "failed: detail"
      if (phase == "strategy") outcome = strategy();
      else if (phase == "explore") outcome = explore();
      else if (phase == "consolidate") outcome = consolidate();
      else if (phase == "candidate") outcome = stage_phase(candidate(), "candidate");
      else if (phase == "regenerate") outcome = regenerate();
      else if (phase == "merge") outcome = merge(merged);
      else fail((dir_ / "round.json").string(), ": unknown phase '", phase, "'");
      if (outcome == "interrupted") {
        record_["detail"] = "the LLM endpoint stopped phase " + phase + "; resume to continue";
        save();
        return "IN_PROGRESS";
      }
      if (!outcome.empty()) {
        record_["state"] = "FAILED:" + phase;
        record_["detail"] = outcome.substr(std::string("failed: ").size());
        save();
        analyse(phase);
        return record_["state"];
      }
      const auto next = std::find(kPhases.begin(), kPhases.end(), phase) + 1;
      if (next == kPhases.end()) record_["state"] = "ABSORBED";
      else record_["phase"] = *next;
      save();
    }
    return record_["state"];
  }

 private:
  fs::path candidate_dir() const { return dir_ / "candidate"; }
  fs::path staged_ckb() const { return dir_ / "staged_ckb"; }
  // The delta as staged, copied out of the candidate's run directory: what the gates judged, and what is merged.
  fs::path staged_delta() const { return dir_ / "staged_delta"; }
  void save() const { write_json(dir_ / "round.json", record_); }

  std::unique_ptr<AgentRun> make_run(const fs::path& run_dir) const {
    AgentRunConfig rc;
    rc.sandbox.run_dir = run_dir;
    rc.sandbox.ckb_dir = staged_ckb();
    rc.sandbox.reference_paths = cfg_.reference_paths;
    rc.sandbox.command_timeout_s = cfg_.command_timeout_s;
    rc.roles_dir = cfg_.ckb_dir / "roles";  // roles come from the real CKB, never from a delta an agent wrote
    rc.max_turns = cfg_.max_turns;
    rc.max_tokens = cfg_.max_tokens;
    return std::make_unique<AgentRun>(rc, backends_());
  }
  AgentRun& candidate() {
    if (!candidate_run_) candidate_run_ = make_run(candidate_dir());
    return *candidate_run_;
  }

  // The main agent writes (from the second round: updates) the round's strategy; every later role of the candidate
  // is pointed at it. The regeneration is not: it works from the CKB alone.
  std::string strategy() {
    AgentRun& run = candidate();
    run.set_source_switch(SourceSwitch::off);
    std::string brief = "Knowledge-base evolution (metainfer evolve), round " + dir_.filename().string() +
                        ". The route is evolution: the knowledge base does not cover the target.\n\nTarget:\n" + cfg_.target +
                        "\n\nThe round's phases, each a separate role: the explorer writes exploration/notes.md (source "
                        "switch " + std::string(to_string(cfg_.explore_switch)) + "); the consolidator turns them into a CKB delta "
                        "under ckb_delta/ (knowledge layers only); an implementer builds a candidate against the CKB plus "
                        "the delta until the gate '" + cfg_.stage + "' passes; then another implementer regenerates from the CKB "
                        "alone (it will not see this strategy), gated again; only then is the delta merged.";
    if (!cfg_.inputs.empty()) brief += " Inputs (the coverage plan, the checkpoint's config) are under inputs/.";
    if (fs::exists(candidate_dir() / "seed" / "failure.md"))
      brief += "\n\nThe previous round failed; the failure analyst's report is seed/failure.md.";
    const ConversationResult r = plan_strategy(run, brief);
    return r.metrics.stop == "error" ? "interrupted" : "";
  }

  std::string explore() {
    AgentRun& run = candidate();
    run.set_source_switch(cfg_.explore_switch);
    std::string task = "Knowledge-base evolution, round " + dir_.filename().string() + ".\n\nTarget:\n" + cfg_.target +
                       "\n\nWrite what the knowledge base lacks for it to exploration/notes.md." + strategy_note(candidate_dir());
    if (fs::exists(candidate_dir() / "seed" / "failure.md"))
      task += "\n\nThe previous round failed. The failure analyst's report (seed/failure.md):\n\n" + read_all(candidate_dir() / "seed" / "failure.md");
    const ConversationResult r = run.converse("explorer", task);
    run.set_source_switch(SourceSwitch::off);
    return r.metrics.stop == "error" ? "interrupted" : "";
  }

  std::string consolidate() {
    AgentRun& run = candidate();
    run.set_source_switch(SourceSwitch::off);
    const ConversationResult r = run.converse(
        "consolidator", "Turn exploration/notes.md into knowledge-base entries under ckb_delta/ (same layout as the CKB) for the target:\n" +
                            cfg_.target + strategy_note(candidate_dir()));
    if (r.metrics.stop == "error") return "interrupted";
    const fs::path delta = candidate_dir() / "ckb_delta";
    if (delta_files(delta).empty()) return "failed: the consolidator wrote no ckb_delta/ entry";
    // Knowledge only: a delta that rewrote roles/ or test_contracts/ would widen the agents' grants or loosen the
    // gates that judge the round. Each such file is a violation and the round fails before anything is staged.
    const std::vector<std::string> refused = refused_delta_files(delta, cfg_.ckb_dir);
    if (!refused.empty()) {
      std::string detail = "the consolidator's delta writes outside the CKB's knowledge layers (refused, counted as violations):";
      for (const auto& r : refused) {
        run.sandbox().record_violation({"consolidator", "ckb_delta", "ckb_delta/" + r.substr(0, r.find(": ")), "delta_outside_knowledge", r});
        detail += "\n  ckb_delta/" + r;
      }
      run.write_records();
      return "failed: " + detail;
    }
    stage_ckb(cfg_.ckb_dir, delta, staged_ckb());
    // Frozen here: the candidate's run directory stays writable to its agents (and their commands) after staging.
    fs::remove_all(staged_delta());
    for (const auto& rel : delta_files(delta)) {
      fs::create_directories((staged_delta() / rel).parent_path());
      fs::copy_file(delta / rel, staged_delta() / rel);
    }
    const std::vector<std::string> errors = new_lint_errors(cfg_.ckb_dir, staged_ckb(), cfg_.repo_root);
    if (!errors.empty()) {
      std::string detail = "the staged delta adds lint errors:";
      for (const auto& e : errors) detail += "\n  " + e;
      return "failed: " + detail;
    }
    return "";
  }

  std::string stage_phase(AgentRun& run, const std::string& which) {
    run.set_source_switch(SourceSwitch::off);
    std::string objective = cfg_.target;
    if (which == "candidate")
      objective += "\n\nUse the knowledge base (including this round's staged entries) and exploration/notes.md." + strategy_note(run.run_dir());
    else objective += "\n\nUse the knowledge base only.";
    if (!cfg_.withheld_sources.empty()) {
      objective += "\n\nThe stage's own source files are not in the run directory: you write them (the other sources are "
                   "there, and what you write must fit what they include and call):";
      for (const auto& f : cfg_.withheld_sources) objective += "\n- " + f;
    }
    const StageResult s = run_stage(run, {cfg_.stage, objective, cfg_.max_repair_rounds, false}, gate_);
    record_[which] = {{"state", s.state}, {"rounds", s.rounds.size()},
                      {"evidence", s.rounds.empty() ? "" : s.rounds.back().evidence_file}};
    if (s.state == "AGENT_ERROR") return "interrupted";
    if (s.state != "PASSED") {
      last_evidence_ = s.rounds.empty() || s.rounds.back().evidence_file.empty() ? s.detail : read_all(run.run_dir() / s.rounds.back().evidence_file);
      return "failed: " + which + " stage " + s.state + (s.detail.empty() ? "" : ": " + s.detail);
    }
    return "";
  }

  std::string regenerate() {
    // From the CKB alone: a fresh directory each time this phase starts (an interrupted regeneration restarts).
    const fs::path regen = dir_ / "regen";
    // An earlier, interrupted attempt's conversations were started and spent tokens: its directory is kept under
    // another name (round_run_dirs counts it) rather than removed with them.
    if (fs::is_directory(regen / "transcripts")) {
      fs::path keep;
      for (int n = 1; fs::exists(keep = dir_ / ("regen-interrupted-" + std::to_string(n))); ++n) {
      }
      fs::rename(regen, keep);
    }
    fs::remove_all(regen);
    lay_down_contracts(regen, cfg_.contracts_dir, cfg_.withheld_sources);
    auto run = make_run(regen);
    const std::string staged = stage_phase(*run, "regenerate");
    if (!staged.empty() || !cfg_.final_gates || !is_engine_directory(regen, cfg_.stage)) return staged;
    // The stage gate passed; its verdict came from the executable the agents' code is linked into. Before the delta
    // may be merged, the regenerated engine must pass the gates that run it from outside (acceptance, L3).
    const FinalGatesOutcome f = cfg_.final_gates(regen);
    // What the confined build's processes changed or reached for (hidden paths) counts like any refusal of the sandbox.
    for (const Violation& v : f.violations) run->sandbox().record_violation(v);
    if (!f.violations.empty()) run->write_records();
    record_["regenerate_final_gates"] = {{"passed", f.passed}, {"state", f.state}, {"acceptance", f.acceptance}};
    save();
    if (f.passed) return "";
    last_evidence_ = f.evidence;
    return "failed: the regeneration passed its stage gate but not the final gates run from outside it (" + f.state +
           "); the delta is not merged";
  }

  std::string merge(std::vector<std::string>& merged) {
    const std::string round = dir_.filename().string();
    std::vector<std::string> evidence;
    for (const char* which : {"candidate", "regenerate"}) {
      const std::string e = record_.contains(which) ? record_[which].value("evidence", "") : "";
      if (!e.empty()) evidence.push_back(round + "/" + (std::string(which) == "candidate" ? "candidate/" : "regen/") + e);
    }
    // The same consolidation `metainfer agents consolidate` runs: knowledge layers only, no new lint error against
    // the CKB as it is now, then the tagged merge.
    // Exactly the delta the gates saw: the staged copy. A candidate delta that differs from it was changed after
    // staging (no role of the later phases may write ckb_delta/; a hard link or a command got round that): the
    // round fails and the change is counted.
    if (!fs::is_directory(staged_delta())) return "failed: the round has no staged copy of its delta (staged_delta/); rerun the round";
    if (!same_delta(candidate_dir() / "ckb_delta", staged_delta())) {
      candidate().sandbox().record_violation({"", "ckb_delta", "ckb_delta/", "delta_changed_after_staging",
                                              "candidate/ckb_delta/ differs from the delta staged (and gated) in phase consolidate"});
      candidate().write_records();
      return "failed: candidate/ckb_delta/ changed after it was staged; the gated delta is not merged";
    }
    const Consolidation c = consolidate_delta(staged_delta(), cfg_.ckb_dir, cfg_.repo_root, round, evidence);
    if (!c.accepted()) return "failed: the delta could not be consolidated into the CKB:\n" + c.describe();
    merged = c.merged;
    record_["merged"] = merged;
    if (cfg_.after_merge) {
      // Reported, never failing the round: the merge is done and verified; this says whether it was enough.
      try {
        record_["coverage_after_merge"] = cfg_.after_merge(cfg_.ckb_dir);
      } catch (const Error& e) {
        record_["coverage_after_merge"] = {{"covered", false}, {"gaps", json::array()}, {"error", e.what()}};
      }
    }
    return "";
  }

  void analyse(const std::string& phase) {
    AgentRun& run = candidate();
    run.set_source_switch(SourceSwitch::off);
    std::string task = "The knowledge-base evolution round " + dir_.filename().string() + " failed in phase " + phase + ": " +
                       record_.value("detail", "") + "\n";
    if (!last_evidence_.empty()) task += "\nGate evidence:\n" + last_evidence_ + "\n";
    task += "\nTarget:\n" + cfg_.target + "\n\nWrite failure/analysis.md for the next round.";
    const ConversationResult r = run.converse("failure_analyst", task);
    record_["analysis"] = fs::exists(candidate_dir() / "failure" / "analysis.md") ? "candidate/failure/analysis.md" : "";
    if (r.metrics.stop == "error") record_["analysis_error"] = r.final_text;
    save();
  }

  const EvolutionConfig& cfg_;
  const BackendFactory& backends_;
  const GateRunner& gate_;
  fs::path dir_;
  json record_;
  std::unique_ptr<AgentRun> candidate_run_;
  std::string last_evidence_;
};

std::vector<fs::path> existing_rounds(const fs::path& work) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(work))
    if (e.is_directory() && e.path().filename().string().rfind("evo-", 0) == 0 && fs::exists(e.path() / "round.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> round_run_dirs(const fs::path& work) {
  std::vector<fs::path> dirs;
  for (const auto& r : existing_rounds(work)) {
    dirs.push_back(r / "candidate");
    std::vector<fs::path> interrupted;  // regenerations that were cut short and restarted
    for (const auto& e : fs::directory_iterator(r))
      if (e.is_directory() && e.path().filename().string().rfind("regen-interrupted-", 0) == 0) interrupted.push_back(e.path());
    std::sort(interrupted.begin(), interrupted.end());
    dirs.insert(dirs.end(), interrupted.begin(), interrupted.end());
    dirs.push_back(r / "regen");
  }
  return dirs;
}

// The evolution's records as one run: every round's candidate and regeneration directories together, and the final
// summary's run directory.
void write_evolution_records(const fs::path& work) {
  std::vector<fs::path> dirs = round_run_dirs(work);
  dirs.push_back(work / kFinalRunDir);
  json rounds = json::array();
  for (const auto& r : existing_rounds(work)) {
    const json rec = json::parse(read_all(r / "round.json"), nullptr, false);
    if (!rec.is_discarded()) rounds.push_back(rec);
  }
  write_run_records(work, combine_run_records(work, dirs));
  write_json(work / "evolution.json", {{"format", "metainfer-evolution/1"}, {"rounds", rounds}});
  // Whether an absorbed round left the target covered: the figures above cannot say it.
  std::string coverage;
  for (const json& rec : rounds) {
    if (!rec.contains("coverage_after_merge")) continue;
    const json& c = rec["coverage_after_merge"];
    coverage += "- " + rec.value("round", std::string("?")) + ": " +
                (c.value("covered", false) ? std::string("the merged CKB covers the target") : std::string("the merged CKB does not yet cover the target"));
    if (c.contains("error")) coverage += " (coverage failed: " + c["error"].get<std::string>() + ")";
    for (const json& g : c.value("gaps", json::array())) coverage += "\n  - gap left: " + g.get<std::string>();
    coverage += "\n";
  }
  if (!coverage.empty()) std::ofstream(work / "summary.md", std::ios::app) << "\n## Coverage after the merge\n\n" << coverage;
}

// The experiment summariser, in <work>/final/, over the whole evolution: the rounds as evolution.json recorded them
// (copied into its inputs/) and the figures of every round's run directories.
void summarise_evolution(const EvolutionConfig& cfg, const BackendFactory& backends, const EvolutionResult& r) {
  const fs::path final_dir = cfg.work_dir / kFinalRunDir;
  fs::create_directories(final_dir / "inputs");
  fs::copy_file(cfg.work_dir / "evolution.json", final_dir / "inputs" / "evolution.json", fs::copy_options::overwrite_existing);
  AgentRunConfig rc;
  rc.sandbox.run_dir = final_dir;
  rc.sandbox.ckb_dir = cfg.ckb_dir;
  rc.sandbox.command_timeout_s = cfg.command_timeout_s;
  rc.roles_dir = cfg.ckb_dir / "roles";
  rc.max_turns = cfg.max_turns;
  rc.max_tokens = cfg.max_tokens;
  AgentRun run(rc, backends());
  std::string outcome = "metainfer evolve: " + r.state + (r.detail.empty() ? "" : " (" + r.detail + ")") + "\n";
  for (const auto& dir : existing_rounds(cfg.work_dir)) {
    const json rec = json::parse(read_all(dir / "round.json"), nullptr, false);
    if (rec.is_discarded()) continue;
    outcome += "- " + dir.filename().string() + ": " + rec.value("state", std::string("?"));
    if (rec.contains("detail")) outcome += " (" + rec["detail"].get<std::string>() + ")";
    for (const char* which : {"candidate", "regenerate"})
      if (rec.contains(which)) outcome += "; " + std::string(which) + " " + rec[which].value("state", std::string("?"));
    outcome += "\n";
  }
  if (!r.merged_files.empty()) outcome += "Merged into the CKB: " + json(r.merged_files).dump() + "\n";
  if (!r.coverage_after_merge.is_null()) outcome += "Coverage after the merge: " + r.coverage_after_merge.dump() + "\n";
  outcome += "Every round's record: inputs/evolution.json.";
  summarise_experiment(run, outcome, combine_run_records(cfg.work_dir, round_run_dirs(cfg.work_dir)));
}

EvolutionResult evolve_rounds(const EvolutionConfig& cfg, const BackendFactory& backends, const GateRunner& gate, bool resume,
                              bool& progressed);

}  // namespace

void require_work_dir_apart_from_contracts(const fs::path& work_dir, const fs::path& contracts_dir) {
  if (contracts_dir.empty()) return;
  const fs::path work = fs::weakly_canonical(fs::absolute(work_dir)), contracts = fs::weakly_canonical(fs::absolute(contracts_dir));
  if (path_within(work, contracts))
    fail("evolve: the work directory ", work.string(), " lies inside the contracts directory ", contracts.string(),
         ", which is copied into every round's run directory (later rounds would get earlier rounds' transcripts); "
         "give --work-dir outside it");
  if (path_within(contracts, work))
    fail("evolve: the contracts directory ", contracts.string(), " lies inside the work directory ", work.string(),
         "; give --work-dir outside it");
}

EvolutionResult evolve(const EvolutionConfig& cfg, const BackendFactory& backends, const GateRunner& gate, bool resume) {
  require_work_dir_apart_from_contracts(cfg.work_dir, cfg.contracts_dir);
  bool progressed = false;
  EvolutionResult r = evolve_rounds(cfg, backends, gate, resume, progressed);
  write_evolution_records(cfg.work_dir);
  // The run's summary report, when this call ended the evolution (an interrupted one is not over; asking again after
  // the end changes nothing).
  if (progressed && r.state != "INTERRUPTED") {
    summarise_evolution(cfg, backends, r);
    write_evolution_records(cfg.work_dir);
  }
  const fs::path report = fs::path(kFinalRunDir) / kExperimentSummaryFile;
  if (fs::is_regular_file(cfg.work_dir / report)) r.experiment_summary = report.generic_string();
  return r;
}

namespace {

EvolutionResult evolve_rounds(const EvolutionConfig& cfg, const BackendFactory& backends, const GateRunner& gate, bool resume,
                              bool& progressed) {
  if (cfg.target.empty()) fail("evolve: no target");
  if (!fs::is_directory(cfg.ckb_dir)) fail("evolve: CKB directory ", cfg.ckb_dir.string(), " does not exist");
  if (!cfg.contracts_dir.empty() && !fs::is_directory(cfg.contracts_dir)) fail("evolve: contracts directory ", cfg.contracts_dir.string(), " does not exist");
  for (const auto& in : cfg.inputs)
    if (!fs::is_regular_file(in)) fail("evolve: input ", in.string(), " is not a file");
  const fs::path state_file = cfg.work_dir / "state.json";
  const json identity = {{"format", "metainfer-evolution/1"}, {"target", cfg.target}, {"stage", cfg.stage}};
  if (fs::exists(state_file)) {
    if (!resume) fail(state_file.string(), ": an evolution is already recorded here; pass --resume to continue it");
    const json j = json::parse(read_all(state_file), nullptr, false);
    if (j.is_discarded() || j.value("target", "") != cfg.target || j.value("stage", "") != cfg.stage)
      fail(state_file.string(), ": recorded for another target or stage; refusing to resume it with this one");
  } else {
    if (resume) fail(state_file.string(), ": nothing to resume");
    write_json(state_file, identity);
  }

  EvolutionResult result;
  for (;;) {
    std::vector<fs::path> rounds = existing_rounds(cfg.work_dir);
    result.rounds.clear();
    for (const auto& r : rounds) result.rounds.push_back(r.filename().string());
    fs::path current;
    if (!rounds.empty()) {
      const json last = json::parse(read_all(rounds.back() / "round.json"));
      if (last["state"] == "ABSORBED") {
        result.state = "ABSORBED";
        result.merged_files = last.value("merged", std::vector<std::string>{});
        if (last.contains("coverage_after_merge")) result.coverage_after_merge = last["coverage_after_merge"];
        return result;
      }
      if (last["state"] == "IN_PROGRESS") current = rounds.back();
    }
    if (current.empty()) {
      if (int(rounds.size()) >= cfg.max_rounds) {
        result.state = "FAILED";
        result.detail = "no round was absorbed in " + std::to_string(rounds.size()) + " round(s)";
        return result;
      }
      current = cfg.work_dir / round_name(int(rounds.size()) + 1);
      lay_down_contracts(current / "candidate", cfg.contracts_dir, cfg.withheld_sources);
      for (const auto& in : cfg.inputs) {
        fs::create_directories(current / "candidate" / "inputs");
        fs::copy_file(in, current / "candidate" / "inputs" / in.filename(), fs::copy_options::overwrite_existing);
      }
      stage_ckb(cfg.ckb_dir, current / "candidate" / "ckb_delta", current / "staged_ckb");
      // The previous round's failure analysis seeds this one, and its strategy is what the orchestrator updates.
      if (!rounds.empty() && fs::exists(rounds.back() / "candidate" / "failure" / "analysis.md")) {
        fs::create_directories(current / "candidate" / "seed");
        fs::copy_file(rounds.back() / "candidate" / "failure" / "analysis.md", current / "candidate" / "seed" / "failure.md");
      }
      if (!rounds.empty() && fs::exists(rounds.back() / "candidate" / kStrategyFile)) {
        fs::create_directories((current / "candidate" / kStrategyFile).parent_path());
        fs::copy_file(rounds.back() / "candidate" / kStrategyFile, current / "candidate" / kStrategyFile);
      }
      write_json(current / "round.json", {{"round", current.filename().string()}, {"phase", "strategy"}, {"state", "IN_PROGRESS"},
                                          {"explore_switch", to_string(cfg.explore_switch)}});
      result.rounds.push_back(current.filename().string());
    }
    Round round(cfg, backends, gate, current);
    progressed = true;
    const std::string state = round.run(result.merged_files);
    if (state == "ABSORBED") {
      result.state = "ABSORBED";
      const json rec = json::parse(read_all(current / "round.json"));
      if (rec.contains("coverage_after_merge")) result.coverage_after_merge = rec["coverage_after_merge"];
      return result;
    }
    if (state == "IN_PROGRESS") {
      result.state = "INTERRUPTED";
      result.detail = current.filename().string() + " stopped by the LLM endpoint; resume to continue";
      return result;
    }
    result.detail = current.filename().string() + ": " + state;
  }
}

}  // namespace

}  // namespace mi::agents
