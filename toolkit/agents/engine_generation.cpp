#include "agents/engine_generation.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "agents/experiment_summary.h"
#include "agents/protected_files.h"
#include "agents/round_strategy.h"
#include "agents/withheld_sources.h"
#include "common/error.h"
#include "generator/manifest.h"
#include "generator/generator.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string objective_text(const EngineStageBrief& b, const std::string& engine_name) {
  std::string t = "Engine " + engine_name + ", stage '" + b.stage + "'. The stage's test contract is tests/stage_" + b.stage +
                  "_test.cpp (read it; you cannot change it). Make the engine's sources satisfy the contracts of this stage, "
                  "from the knowledge base only (search_ckb, read_file '@ckb/contracts/<id>.toml'):\n";
  for (const ckb::Contract* c : b.contracts) {
    t += "- " + c->id + " (@ckb/" + fs::relative(c->source, c->source.parent_path().parent_path()).string() + "): " + c->title;
    if (!c->summary.empty()) t += ". " + c->summary;
    t += "\n";
  }
  t += "\nThe files implementing them (under src/, listed in MANIFEST.json). They are NOT in the engine directory when "
       "the stage starts: you write them, from the contracts. The other stages' files are there (the gate builds the whole "
       "engine), so what you write must provide what they include and call:\n";
  for (const auto& f : b.files) t += "- " + f + "\n";
  t += "\nThe gate builds the whole engine (CMakeLists.txt, protected) and runs this stage's test contract. The plan the "
       "engine was generated from is plan.json.";
  return t;
}

void write_generation_record(const fs::path& run_dir, const EngineGenerationResult& r) {
  json stages = json::array();
  for (const auto& s : r.stages) {
    json rounds = json::array();
    for (const auto& x : s.rounds) rounds.push_back({{"round", x.round}, {"gate", x.gate}, {"evidence", x.evidence_file}});
    stages.push_back({{"stage", s.stage}, {"state", s.state}, {"detail", s.detail}, {"rounds", rounds}});
  }
  json final = nullptr;
  if (r.final_gates_ran) final = {{"passed", r.final_gates.passed}, {"state", r.final_gates.state}, {"acceptance", r.final_gates.acceptance}};
  auto path_or_null = [](const std::string& p) { return p.empty() ? json(nullptr) : json(p); };
  generator::write_file(run_dir / ".metainfer" / "generation.json",
             json{{"format", "metainfer-agents-generation/1"}, {"state", r.state}, {"detail", r.detail}, {"stages", stages},
                  {"final_gates", final}, {"strategy", path_or_null(r.strategy)},
                  {"experiment_summary", path_or_null(r.experiment_summary)}}.dump(2) + "\n");
}

// What the orchestrator is told: the route is fixed (the plan is covered), the stages and their contracts and files.
std::string strategy_brief(const std::vector<EngineStageBrief>& stages) {
  std::string t = "Generation of an engine by LLM implementers (metainfer generate --backend agents). The coverage plan is "
                  "plan.json (covered; the constraints are in it); the engine's files are listed in MANIFEST.json. The "
                  "stages, in this order, each judged by its test contract (each stage's gate also reruns the earlier "
                  "stages' tests); a stage's own source files are withheld when it starts, and its implementer writes them:\n";
  for (const auto& b : stages) {
    t += "\n" + b.stage + " (tests/stage_" + b.stage + "_test.cpp)\n  contracts:";
    for (const ckb::Contract* c : b.contracts) t += " " + c->id;
    t += "\n  files:";
    for (const auto& f : b.files) t += " " + f;
    t += "\n";
  }
  t += "\nThen the final gates: build, provenance, acceptance on the checkpoint in every mode the engine ships, L3.";
  return t;
}

// What the experiment summariser is told happened.
std::string outcome_text(const EngineGenerationResult& r) {
  std::string t = "metainfer generate --backend agents: " + r.state + (r.detail.empty() ? "" : " (" + r.detail + ")") + "\n";
  for (const auto& s : r.stages) {
    t += "- stage " + s.stage + ": " + s.state + " after " + std::to_string(s.rounds.size()) + " round(s):";
    for (const auto& x : s.rounds) t += " round " + std::to_string(x.round) + " " + x.gate + (x.evidence_file.empty() ? "" : " (" + x.evidence_file + ")") + ";";
    t += "\n";
  }
  if (r.final_gates_ran) t += "- final gates (" + std::string(kAgentFinalGates) + "): " + r.final_gates.state + " (reports/agents/final_gates.txt)\n";
  return t;
}

// The stages in order, each starting with its own sources withheld, then the final gates; the state says where it
// stopped.
void run_stages_and_final_gates(AgentRun& run, const std::vector<EngineStageBrief>& stages, const EngineGenerationSpec& spec,
                                const GateRunner& stage_gate, const FinalGatesRunner& final_gates, EngineGenerationResult& result) {
  const fs::path dir = run.run_dir();
  for (const auto& b : stages) {
    withhold_sources(dir, b.files);
    const StageResult s = run_stage(run, {b.stage, b.objective + strategy_note(dir), spec.max_repair_rounds, spec.review}, stage_gate);
    result.stages.push_back(s);
    write_generation_record(dir, result);
    if (s.state != "PASSED") {
      result.state = (s.state == "FAILED" ? "FAILED" : s.state) + ":" + b.stage;
      result.detail = s.detail;
      return;
    }
  }
  // Nothing changes between the last stage gate and the final gates but by an agent, and no agent runs in between;
  // the hash check still runs, so a file changed outside the loop is caught too.
  try {
    require_untampered(dir);
  } catch (const Error& e) {
    result.state = "TAMPERED:final";
    result.detail = e.what();
    return;
  }
  result.final_gates = final_gates(dir);
  result.final_gates_ran = true;
  // What the confined build's processes changed or reached for (hidden paths) counts like any refusal of the sandbox.
  for (const Violation& v : result.final_gates.violations) run.sandbox().record_violation(v);
  generator::write_file(dir / "reports" / "agents" / "final_gates.txt", result.final_gates.evidence);
  result.state = result.final_gates.passed ? result.final_gates.acceptance : result.final_gates.state;
  if (!result.final_gates.passed && result.state.rfind("FAILED", 0) != 0) result.state = "FAILED:" + result.state;
}

}  // namespace

std::vector<EngineStageBrief> engine_stage_briefs(const ckb::Ckb& ckb, const fs::path& engine_dir) {
  const generator::Engine engine = generator::load_engine(engine_dir);
  std::vector<EngineStageBrief> out;
  for (const std::string& stage : ckb.stages) {
    if (std::find(engine.stage_tests.begin(), engine.stage_tests.end(), stage) == engine.stage_tests.end()) continue;
    EngineStageBrief b;
    b.stage = stage;
    // This engine's contracts only: those its plan requires and those its files implement (a dense model's engine
    // has no Gated DeltaNet to write, though the CKB's model_components stage knows one).
    std::set<std::string> engine_contracts, ids;
    for (const auto& f : engine.manifest.at("files")) engine_contracts.insert(f.value("contract", ""));
    if (fs::is_regular_file(engine_dir / "plan.json")) {
      const json plan = json::parse(generator::read_file(engine_dir / "plan.json"), nullptr, false);
      if (!plan.is_discarded())
        for (const json& r : plan.value("requirements", json::array())) engine_contracts.insert(r.value("contract", ""));
    }
    for (const auto& c : ckb.contracts)
      if (c.stage == stage && engine_contracts.count(c.id)) {
        b.contracts.push_back(&c);
        ids.insert(c.id);
      }
    for (const auto& f : engine.manifest.at("files")) {
      const std::string path = f.value("path", "");
      if (path.rfind("src/", 0) == 0 && ids.count(f.value("contract", ""))) b.files.push_back(path);
    }
    b.objective = objective_text(b, engine.name);
    out.push_back(std::move(b));
  }
  if (out.empty()) fail(engine_dir.string(), ": the engine carries no stage test of a CKB stage (MANIFEST.json \"stages\")");
  return out;
}

EngineGenerationResult generate_engine_with_agents(AgentRun& run, const std::vector<EngineStageBrief>& stages,
                                                   const EngineGenerationSpec& spec, const GateRunner& stage_gate,
                                                   const FinalGatesRunner& final_gates) {
  const fs::path dir = run.run_dir();
  EngineGenerationResult result;
  // The main agent first: its strategy is the one thing every later role is pointed at.
  const ConversationResult plan = plan_strategy(run, strategy_brief(stages), "strategy");
  if (fs::is_regular_file(dir / kStrategyFile)) result.strategy = kStrategyFile;
  if (plan.metrics.stop == "error") {
    result.state = "AGENT_ERROR:strategy";
    result.detail = plan.final_text;
  } else {
    run_stages_and_final_gates(run, stages, spec, stage_gate, final_gates, result);
  }
  write_generation_record(dir, result);
  run.write_records();
  // Last, the run's summary report from the figures measured so far; an endpoint that kept failing gets no more calls.
  if (result.state.rfind("AGENT_ERROR", 0) != 0) {
    summarise_experiment(run, outcome_text(result), run.metrics());
    if (fs::is_regular_file(dir / kExperimentSummaryFile)) result.experiment_summary = kExperimentSummaryFile;
    write_generation_record(dir, result);
  }
  return result;
}

}  // namespace mi::agents
