#include "agents/stage_loop.h"

#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "agents/gate_watch.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/run_dir_snapshot.h"
#include "agents/signature_files.h"
#include "agents/source_switch.h"
#include "common/error.h"
#include "generator/manifest.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write_record(const fs::path& run_dir, const StageResult& r) {
  json rounds = json::array();
  for (const auto& x : r.rounds)
    rounds.push_back({{"round", x.round}, {"implementer", x.implementer}, {"reviewer", x.reviewer}, {"gate", x.gate},
                      {"evidence_file", x.evidence_file}});
  generator::write_file(run_dir / ".metainfer" / "stages" / (r.stage + ".json"),
             json{{"stage", r.stage}, {"state", r.state}, {"detail", r.detail}, {"rounds", rounds}}.dump(2) + "\n");
}

// The stage's record from an earlier session in this run directory (an interrupted `evolve --resume`), if any.
std::optional<StageResult> read_record(const fs::path& run_dir, const std::string& stage) {
  const fs::path file = run_dir / ".metainfer" / "stages" / (stage + ".json");
  if (!fs::is_regular_file(file)) return std::nullopt;
  std::ifstream in(file);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("stage", "") != stage)
    fail(file.string(), ": not a stage record for '", stage, "'; remove it to run the stage from its first round");
  StageResult r{stage, j.value("state", ""), {}, j.value("detail", "")};
  for (const json& x : j.value("rounds", json::array()))
    r.rounds.push_back({x.value("round", 0), x.value("implementer", ""), x.value("reviewer", ""), x.value("gate", ""),
                        x.value("evidence_file", "")});
  return r;
}

std::string implementer_task(const StageSpec& stage, int round, const std::string& evidence_file, const std::string& evidence,
                             const std::string& review_file) {
  std::string task = "Stage '" + stage.id + "', round " + std::to_string(round) + ".\n\nObjective:\n" + stage.objective + "\n";
  if (round > 0) {
    task += "\nThe gate judged the previous round and it FAILED. Its evidence (also in " + evidence_file + "):\n\n" + evidence + "\n";
  }
  if (!review_file.empty()) task += "\nThe specification reviewer's report on the previous round is in " + review_file + ".\n";
  task += "\nWhen you have made your changes, stop and summarise them. The gate decides whether the stage passes.";
  return task;
}

// Removes the top-level build trees (run_dir_snapshot.h's scratch trees, .git aside); a symlink is removed, not
// followed.
void remove_build_trees(const fs::path& run_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name != ".git" && scratch_tree_name(name)) fs::remove_all(e.path(), ec);
  }
}

}  // namespace

GateRunner script_gate(double timeout_s, std::size_t max_evidence_bytes, std::vector<fs::path> hidden) {
  return [=](const fs::path& run_dir, const std::string& stage) -> GateOutcome {
    const std::string script = "gates/" + stage + ".sh";
    if (!fs::is_regular_file(run_dir / script)) return {false, "gate script " + script + " does not exist"};
    // The gate runs agent-written code: no network, the protected paths read-only and the references hidden, as for
    // agents' commands.
    // Files carrying a foreign signature are hidden from it as from agents' commands (signature_files.h).
    std::vector<fs::path> hide = hidden;
    for (const auto& f : signature_file_paths(run_dir)) hide.push_back(f);
    // The gate builds from scratch, as B0 does for engines: the build trees are the agents' scratch (their contents
    // are not judged as sources), so a stale binary or a planted CMakeCache.txt there must not be what it runs.
    remove_build_trees(run_dir);
    // What the script (and the agent-written code it calls) changes in the run directory is judged afterwards, as an
    // agent's command would be (gate_watch.h).
    std::optional<GateWatch> watch;
    try {
      watch.emplace(run_dir, script);
    } catch (const Error& e) {
      return {false, std::string("gate ") + script + " not run: " + e.what()};
    }
    std::vector<fs::path> readonly = protected_mount_points(run_dir);
    readonly.insert(readonly.end(), watch->readonly().begin(), watch->readonly().end());
    CommandResult r;
    std::string not_run;
    try {
      // Audited (gate_watch.h): a hidden path the script or what it calls reached for fails the gate and counts.
      r = run_isolated_command("bash " + script, run_dir, {}, timeout_s, max_evidence_bytes, hide, readonly, {}, true,
                               /*audit=*/true);
    } catch (const Error& e) {
      not_run = e.what();
    }
    std::vector<Violation> violations = watch->judge();
    if (!not_run.empty()) return {false, std::string("gate ") + script + " not run: " + not_run, std::move(violations)};
    // The script's own wildcards explain an access to a hidden file as an agent command's do (command_audit.h).
    std::string script_text;
    try {
      script_text = generator::read_file(run_dir / script);
    } catch (const std::exception&) {
    }
    const std::vector<Violation> reached = judge_gate_accesses(run_dir, script, r, hidden, "bash " + script + "\n" + script_text);
    std::string head = r.timed_out ? "gate " + script + " timed out after " + std::to_string(int(timeout_s)) + " s"
                                   : "gate " + script + ": exit status " + std::to_string(r.exit_code);
    const std::string evidence = describe_gate_violations(script, violations) + describe_gate_accesses(script, r, reached) + head + "\n" + r.output;
    violations.insert(violations.end(), reached.begin(), reached.end());
    const bool passed = !r.timed_out && r.exit_code == 0 && violations.empty();
    return {passed, evidence, std::move(violations)};
  };
}

StageResult run_stage(AgentRun& run, const StageSpec& stage, const GateRunner& gate) {
  StageResult result{stage.id, "FAILED", {}, ""};
  const fs::path run_dir = run.run_dir();
  std::string evidence, evidence_file, review_file;
  // A stage this run directory already worked on (a session that was stopped) continues where it stopped: a PASSED or
  // TAMPERED verdict stands, and the rounds the gate judged stay spent, so stopping and resuming never buys a stage
  // more repair rounds. A round the gate did not judge (the endpoint failed in it) is run again.
  int first_round = 0;
  if (std::optional<StageResult> earlier = read_record(run_dir, stage.id)) {
    if (earlier->state == "PASSED" || earlier->state == "TAMPERED") return *earlier;
    for (const StageRound& r : earlier->rounds)
      if (r.gate == "PASSED" || r.gate == "FAILED") result.rounds.push_back(r);
    if (!result.rounds.empty()) {
      const StageRound& last = result.rounds.back();
      first_round = last.round + 1;
      evidence_file = last.evidence_file;
      evidence = generator::read_file(run_dir / evidence_file);
      if (!last.reviewer.empty() && fs::exists(run_dir / ("review/" + stage.id + "-r" + std::to_string(last.round) + ".md")))
        review_file = "review/" + stage.id + "-r" + std::to_string(last.round) + ".md";
    }
  }
  for (int round = first_round; round <= stage.max_repair_rounds; ++round) {
    StageRound rec;
    rec.round = round;
    rec.gate = "NOT_RUN";
    const std::string tag = stage.id + "-r" + std::to_string(round);
    const ConversationResult impl = run.converse("implementer", implementer_task(stage, round, evidence_file, evidence, review_file), tag + "-implementer");
    rec.implementer = impl.metrics.id;
    if (impl.metrics.stop == "error") {
      result.rounds.push_back(rec);
      result.state = "AGENT_ERROR";
      result.detail = impl.final_text;
      break;
    }
    review_file.clear();
    if (stage.review) {
      const std::string file = "review/" + tag + ".md";
      const ConversationResult rev = run.converse(
          "spec_reviewer", "Review the sources of stage '" + stage.id + "' against its contracts. Objective of the stage:\n" +
                               stage.objective + "\nWrite your findings to " + file + ".",
          tag + "-reviewer");
      rec.reviewer = rev.metrics.id;
      if (fs::exists(run_dir / file)) review_file = file;
    }
    try {
      require_untampered(run_dir);
    } catch (const Error& e) {
      rec.gate = "TAMPERED";
      result.rounds.push_back(rec);
      result.state = "TAMPERED";
      result.detail = e.what();
      break;
    }
    GateOutcome g = gate(run_dir, stage.id);
    // What the agent-written code the gate ran changed (undone by the gate) counts like any refusal of the sandbox.
    for (const Violation& v : g.violations) run.sandbox().record_violation(v);
    if (!g.violations.empty()) g.passed = false;
    // The evidence goes to the next implementer, who may never read reference text: a gate that quoted a foreign
    // file (a compiler error listing an #include'd model file, a test printing one) hands over no text of it, as an
    // agent's command output would not (found by review: a checkpoint's own modeling_*.py, quoted line by line).
    if (const auto sig = find_quoted_foreign_signature(g.evidence)) {
      run.sandbox().record_violation({"gate", "gate", "", "foreign_signature",
                                      "the gate's evidence carries a " + sig->framework + " source signature (\"" + sig->marker +
                                          "\"); withheld from the implementer"});
      g.passed = false;
      g.evidence = "[gate evidence withheld (foreign_signature): it carries a " + sig->framework +
                   " source signature; the gate counts as FAILED]\n";
    }
    rec.gate = g.passed ? "PASSED" : "FAILED";
    evidence = g.evidence;
    evidence_file = "reports/" + stage.id + "/round-" + std::to_string(round) + ".txt";
    rec.evidence_file = evidence_file;
    generator::write_file(run_dir / evidence_file, g.evidence);
    result.rounds.push_back(rec);
    write_record(run_dir, result);
    if (g.passed) {
      result.state = "PASSED";
      break;
    }
  }
  if (result.state == "FAILED") result.detail = "the gate failed in every round (" + std::to_string(result.rounds.size()) + ")";
  write_record(run_dir, result);
  run.write_records();
  return result;
}

}  // namespace mi::agents
