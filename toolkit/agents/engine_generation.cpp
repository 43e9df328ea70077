#include "agents/engine_generation.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "agents/protected_files.h"
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
  t += "\nThe files implementing them (under src/, listed in MANIFEST.json; the generator drafted them from the CKB's "
       "components, and you own them now):\n";
  for (const auto& f : b.files) t += "- " + f + "\n";
  t += "\nThe gate builds the whole engine (CMakeLists.txt, protected) and runs this stage's test contract. The plan the "
       "engine was generated from is plan.json; the stage list is strategy/strategy.md.";
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
  generator::write_file(run_dir / ".metainfer" / "generation.json",
             json{{"format", "metainfer-agents-generation/1"}, {"state", r.state}, {"detail", r.detail}, {"stages", stages},
                  {"final_gates", final}}.dump(2) + "\n");
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
  // The roles share no memory; the stage list is the one thing every role reads first (the implementer's prompt
  // points at it). Written by the workflow, not by an agent.
  std::string strategy = "# Strategy (written by the workflow)\n\nRoute: regular generation with LLM implementers; the "
                         "engine's stages, in order, each judged by its test contract:\n\n";
  for (const auto& b : stages) strategy += "1. " + b.stage + " (tests/stage_" + b.stage + "_test.cpp)\n";
  strategy += "\nEach stage's gate also reruns the earlier stages' tests. Then the final gates: build, provenance, "
              "acceptance on the checkpoint in every mode the engine ships, L3.\n";
  generator::write_file(dir / "strategy" / "strategy.md", strategy);

  EngineGenerationResult result;
  for (const auto& b : stages) {
    const StageResult s = run_stage(run, {b.stage, b.objective, spec.max_repair_rounds, spec.review}, stage_gate);
    result.stages.push_back(s);
    write_generation_record(dir, result);
    if (s.state != "PASSED") {
      result.state = (s.state == "FAILED" ? "FAILED" : s.state) + ":" + b.stage;
      result.detail = s.detail;
      write_generation_record(dir, result);
      return result;
    }
  }
  // Nothing changes between the last stage gate and the final gates but by an agent, and no agent runs in between;
  // the hash check still runs, so a file changed outside the loop is caught too.
  try {
    require_untampered(dir);
  } catch (const Error& e) {
    result.state = "TAMPERED:final";
    result.detail = e.what();
    write_generation_record(dir, result);
    return result;
  }
  result.final_gates = final_gates(dir);
  result.final_gates_ran = true;
  generator::write_file(dir / "reports" / "agents" / "final_gates.txt", result.final_gates.evidence);
  result.state = result.final_gates.passed ? result.final_gates.acceptance : result.final_gates.state;
  if (!result.final_gates.passed && result.state.rfind("FAILED", 0) != 0) result.state = "FAILED:" + result.state;
  write_generation_record(dir, result);
  run.write_records();
  return result;
}

}  // namespace mi::agents
