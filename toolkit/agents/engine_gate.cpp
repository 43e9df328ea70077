#include "agents/engine_gate.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "agents/gate_watch.h"
#include "agents/isolated_command.h"
#include "agents/protected_files.h"
#include "agents/signature_files.h"
#include "agents/source_switch.h"
#include "common/error.h"
#include "common/json_file.h"
#include "generator/generator.h"
#include "process/subprocess.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

// The files of checkpoint directory `model` a gate may show agent-written code, by an allow-list: the weights
// (model*.safetensors, the shard index and the shards it names) and the configuration and tokenizer JSON an engine
// loads, each only when it carries no foreign signature. Never the whole directory: it can hold the checkpoint's own
// model code (trust_remote_code's modeling_*.py; found by review: an #include of it came back quoted in the compiler
// errors of the gate's evidence) and, for a golden case, the answers (trace.json's greedy ids, logits.safetensors;
// found by review: a static initializer printed them into the next round's evidence).
std::vector<fs::path> checkpoint_data_files(const fs::path& model) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(model, ec)) return files;
  std::set<std::string> allowed = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                   "special_tokens_map.json", "model.safetensors.index.json"};
  try {  // shards the index names, by plain file name (the engine's loader refuses any other)
    const json index = read_json_file(model / "model.safetensors.index.json");
    for (const auto& [tensor, file] : index.at("weight_map").items())
      if (file.is_string() && fs::path(file.get<std::string>()).filename() == file.get<std::string>() &&
          file.get<std::string>().ends_with(".safetensors"))
        allowed.insert(file.get<std::string>());
  } catch (const std::exception&) {  // no index, or one the engine will refuse with its own message
  }
  // A golden case's answers (gates/acceptance_gate.cpp reads them) are never shown, whatever an index names.
  for (const char* answers : {"trace.json", "logits.safetensors"}) allowed.erase(answers);
  for (const auto& e : fs::directory_iterator(model, ec)) {
    const std::string name = e.path().filename().string();
    const bool weights = name.starts_with("model") && name.ends_with(".safetensors");
    if ((!weights && !allowed.count(name)) || !fs::is_regular_file(e.path(), ec)) continue;
    if (name.ends_with(".json") && find_foreign_signature_in_file(e.path())) continue;  // the whole file: a tokenizer.json is 7-17 MB
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// The host's ccache directory, when ccache is installed: read-only inside the sandbox.
std::string host_ccache_dir() {
  const process::RunResult r = process::run({"ccache", "-k", "cache_dir"}, {.timeout_s = 10});
  if (r.exit_code != 0) return "";
  std::string dir = r.out;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
  return fs::is_directory(dir) ? dir : "";
}

// What a failed verification says, for the next round's implementer: each failing gate's summary and evidence.
std::string evidence_of(const json& report) {
  std::string out = "verification state: " + report.value("state", "?") + "\n";
  for (const json& g : report.value("gates", json::array())) {
    out += std::string(g.value("passed", false) ? "PASSED " : "FAILED ") + g.value("id", "?") + ": " + g.value("summary", "") + "\n";
    if (!g.value("passed", false) && g.contains("evidence")) out += g["evidence"].dump(2) + "\n";
  }
  return out;
}

}  // namespace

namespace {

struct VerifierRun {
  bool timed_out = false;
  int exit_code = -1;
  std::optional<json> report;  // the verifier's --json report; none when it gave none
  std::string output_tail;
  std::vector<Violation> violations;  // what the agent-written code it ran changed in the run directory (gate_watch.h)
  std::vector<Violation> reached;     // the hidden paths its processes reached for (the audit: gate_watch.h)
  std::string audit_note;             // describe_gate_accesses: the reached paths, or that the run was not audited
};

// `metainfer verify . --only <only> --allow-modified-sources --json` in the run directory, isolated.
VerifierRun run_verifier(const EngineGateOptions& o, const fs::path& run_dir, const std::string& only, int threads) {
  // Only what the verifier reads of the toolkit's checkout (the gate bounds and contracts in ckb/, the stage-test
  // sources it compares against, the formatting style), never the whole checkout: an evolution's work directory,
  // build trees or a candidate's sources there would let the code under test read what it must re-derive (found by
  // review: a SWITCH=OFF regeneration could #include the SWITCH=ON candidate's file by its absolute path).
  std::vector<fs::path> readonly;
  for (const char* part : {"ckb", "tests/engine_contracts", ".clang-format"})
    if (fs::exists(o.source_dir / part)) readonly.push_back(o.source_dir / part);
  // The checkpoint the stage tests load (the manifest's constraints.model), wherever it lies: its data files only.
  try {
    const fs::path model = read_json_file(run_dir / "MANIFEST.json").at("constraints").at("model").get<std::string>();
    for (const fs::path& f : checkpoint_data_files(model)) readonly.push_back(f);
  } catch (const std::exception&) {  // no manifest or no model: the verifier reports what it misses
  }
  if (!o.metainfer_binary.empty()) readonly.push_back(o.metainfer_binary);  // the binary alone, not its build tree
  // The gate bounds (test_contracts/gates.toml) come from the toolkit's own CKB, named here rather than left to
  // whatever the verifier's default would find: an evolution round's staged CKB, which agents' deltas shaped, must
  // never be what judges them.
  std::map<std::string, std::string> env = {{"METAINFER_CKB", (o.source_dir / "ckb").string()}};
  if (const std::string cache = host_ccache_dir(); !cache.empty()) {
    readonly.push_back(cache);
    env.insert({{"CCACHE_DISABLE", ""}, {"CCACHE_DIR", cache}, {"CCACHE_READONLY", "1"}, {"CCACHE_TEMPDIR", "/tmp"}});
  }
  // The verifier's reports go to the sandbox's private /tmp, discarded with it: the gate's verdict is the report the
  // verifier prints. reports/ is read-only like every protected path (created first, so that it can be mounted), so
  // the agent-written code the verifier runs cannot leave a report or a round's evidence there.
  // Run as a program, not through a shell, where bubblewrap allows (run_isolated_command's `program`): then the
  // agent-written code the verifier runs cannot rewrite the verdict in a wrapper process. The string is the same
  // command for the unshare fallback's shell.
  const std::vector<std::string> program = {o.metainfer_binary.string(), "verify", ".", "--only", only,
                                            "--allow-modified-sources", "--reports-dir", kStageGateReportsDir,
                                            "--threads", std::to_string(std::max(1, threads)), "--json"};
  std::string command = "'";
  command.append(o.metainfer_binary.string()).append("' verify . --only ").append(only);
  command.append(" --allow-modified-sources --reports-dir ").append(kStageGateReportsDir);
  command.append(" --threads ").append(std::to_string(std::max(1, threads))).append(" --json");
  fs::create_directories(run_dir / "reports");
  VerifierRun v;
  // The verifier builds into build/ and reports into its private /tmp: anything else the agent-written code it runs
  // changes in the run directory is judged afterwards, as an agent's command would be (gate_watch.h).
  std::optional<GateWatch> watch;
  try {
    watch.emplace(run_dir, "verify --only " + only);
  } catch (const Error& e) {
    v.output_tail = e.what();
    return v;
  }
  std::vector<fs::path> overlays = protected_mount_points(run_dir);
  overlays.insert(overlays.end(), watch->readonly().begin(), watch->readonly().end());
  CommandResult r;
  try {
    // Files of the engine directory carrying a foreign signature are hidden from the agent code the verifier runs, as
    // from agents' commands (signature_files.h).
    std::vector<fs::path> hidden = o.hidden_paths;
    for (const auto& f : signature_file_paths(run_dir)) hidden.push_back(f);
    // Audited (gate_watch.h): from the verifier's own execve on, every process of the run (the verifier, the build it
    // starts, the stage tests) is seen, and only hidden paths are kept: the verifier's reads of the run directory, the
    // toolkit's files and the system never count. Its own scan of the engine directory opens every file it lists, a
    // covered record among them: judged as a walk (judge_gate_accesses' trusted_program), while any process it starts
    // that reaches for a hidden path counts.
    r = run_isolated_command(command, run_dir, readonly, o.timeout_s, o.max_evidence_bytes * 4, hidden, overlays, env, true,
                             /*audit=*/true, program);
  } catch (const Error& e) {  // no isolation that can keep the references hidden: the gate does not run
    v.output_tail = e.what();
    v.violations = watch->judge();
    return v;
  }
  v.violations = watch->judge();
  const std::string gate = "verify --only " + only;
  v.reached = judge_gate_accesses(run_dir, gate, r, o.hidden_paths, command, /*trusted_program=*/true);
  v.audit_note = describe_gate_accesses(gate, r, v.reached);
  v.timed_out = r.timed_out;
  v.exit_code = r.exit_code;
  v.output_tail = process::tail(r.output, o.max_evidence_bytes);
  if (!r.timed_out) {
    try {
      v.report = process::last_json_line(r.output);
    } catch (const std::exception&) {
    }
  }
  return v;
}

std::string verifier_failure(const EngineGateOptions& o, const VerifierRun& v) {
  if (v.timed_out) return "the verifier timed out after " + std::to_string(int(o.timeout_s)) + " s\n" + v.output_tail;
  return "the verifier gave no report (exit status " + std::to_string(v.exit_code) + "):\n" + v.output_tail;
}

}  // namespace

GateRunner engine_stage_gate(EngineGateOptions o) {
  return [o](const fs::path& run_dir, const std::string& stage) -> GateOutcome {
    // The stage and every stage before it (MANIFEST.json order): a later stage's edits must not break an earlier
    // stage, and after the last stage this one run has judged every stage on the final sources.
    std::string only;
    try {
      for (const std::string& s : generator::load_engine(run_dir).stage_tests) {
        only += (only.empty() ? "" : ",") + ("L1_stage:" + s);
        if (s == stage) break;
      }
    } catch (const std::exception& e) {
      return {false, std::string("the run directory is not a readable engine directory: ") + e.what()};
    }
    if (only.find("L1_stage:" + stage) == std::string::npos) return {false, "the engine has no stage test for stage '" + stage + "'"};
    VerifierRun v = run_verifier(o, run_dir, only, 1);
    // A verifier run that left changes outside the build tree, or whose processes reached for a hidden path, fails,
    // whatever the report says; the evidence names them.
    const std::string changed = describe_gate_violations("verify --only " + only, v.violations) + v.audit_note;
    v.violations.insert(v.violations.end(), v.reached.begin(), v.reached.end());
    if (!v.report) return {false, changed + verifier_failure(o, v), std::move(v.violations)};
    const bool passed = v.exit_code == 0 && v.report->value("state", "") == "PASSED:" + only && v.violations.empty();
    return {passed, changed + process::tail(evidence_of(*v.report), o.max_evidence_bytes), std::move(v.violations)};
  };
}

bool is_engine_directory(const fs::path& dir, const std::string& stage) {
  return fs::is_regular_file(dir / "MANIFEST.json") && fs::is_regular_file(dir / "tests" / ("stage_" + stage + "_test.cpp"));
}

GateRunner engine_or_script_gate(EngineGateOptions options, double script_timeout_s) {
  GateRunner engine = engine_stage_gate(options), script = script_gate(script_timeout_s, options.max_evidence_bytes, options.hidden_paths);
  return [engine, script](const fs::path& run_dir, const std::string& stage) {
    return is_engine_directory(run_dir, stage) ? engine(run_dir, stage) : script(run_dir, stage);
  };
}

namespace {

// The final gates' evidence reaches LLM roles (the failure analyst, then the next round's implementer): evidence that
// quotes a foreign file (acceptance quotes the engine's output, B0 the compiler's) hands over none of it and fails.
void withhold_foreign_evidence(FinalGatesOutcome& out) {
  if (const auto sig = find_quoted_foreign_signature(out.evidence)) {
    out.passed = false;
    out.acceptance.clear();
    out.state = "FAILED:foreign_signature";
    out.evidence = "[final gates' evidence withheld (foreign_signature): it carries a " + sig->framework + " source signature]\n";
  }
}

}  // namespace

FinalGatesOutcome engine_final_gates(const EngineGateOptions& o, const fs::path& engine_dir, int threads,
                                     const std::vector<fs::path>& golden_cases) {
  FinalGatesOutcome out;
  // B0 compiles agent-written code, which could #include (or .incbin) a reference tree by its absolute path: it runs
  // in the isolation of the stage gate, with the same paths hidden, and no agent acts between it and the gates below.
  const VerifierRun build = run_verifier(o, engine_dir, "B0_build", threads);
  // A build that changed the engine directory outside build/, or whose processes reached for a hidden path, fails
  // too, whatever its report says (gate_watch.h); either is a violation of the run.
  out.violations = build.violations;
  out.violations.insert(out.violations.end(), build.reached.begin(), build.reached.end());
  if (!build.report || build.exit_code != 0 || build.report->value("state", "") != "PASSED:B0_build" || !out.violations.empty()) {
    out.state = "FAILED:B0_build";
    out.evidence = process::tail(describe_gate_violations("verify --only B0_build", build.violations) + build.audit_note +
                                     "the confined build (B0 in the isolation of agents' commands) failed:\n" +
                                     (build.report ? evidence_of(*build.report) : verifier_failure(o, build)),
                                 o.max_evidence_bytes);
    withhold_foreign_evidence(out);
    return out;
  }
  // The rest on the host, against that build (--prebuilt: B0 hashes it, nothing of it is built or configured here):
  // acceptance and L3 run the engine only inside the gate runner's own bubblewrap sandbox, which cannot be nested
  // inside run_isolated_command's.
  std::vector<std::string> argv = {o.metainfer_binary.string(), "verify", engine_dir.string(), "--only", kAgentFinalGates,
                                   "--allow-modified-sources", "--prebuilt", "--threads", std::to_string(std::max(1, threads)),
                                   "--json"};
  for (const auto& g : golden_cases) argv.insert(argv.end(), {"--golden", g.string()});
  for (const auto& h : o.hidden_paths) argv.insert(argv.end(), {"--hide", h.string()});  // the reference trees
  const process::RunResult r = process::run(argv, {.timeout_s = o.timeout_s});
  json report;
  try {
    if (r.timed_out) throw std::runtime_error("timed out");
    report = process::last_json_line(r.out);
  } catch (const std::exception&) {
    out.state = "FAILED:verifier";
    out.evidence = (r.timed_out ? "the verifier timed out after " + std::to_string(int(o.timeout_s)) + " s\n"
                                : "the verifier gave no report (exit status " + std::to_string(r.exit_code) + "):\n") +
                   process::tail(r.out + r.err, o.max_evidence_bytes);
    withhold_foreign_evidence(out);
    return out;
  }
  out.state = report.value("state", "");
  out.evidence = process::tail(build.audit_note + "confined build: " + evidence_of(*build.report) + evidence_of(report), o.max_evidence_bytes);
  // Every selected gate must have run and passed: a report without acceptance or L3 is no acceptance.
  bool acceptance = false, evidence = false, provenance = false;
  for (const json& g : report.value("gates", json::array())) {
    const std::string id = g.value("id", "");
    const bool passed = g.value("passed", false);
    if (id == "L0_provenance" && passed) provenance = true;
    if (id == "PASS_VERIFIED" && passed) {
      acceptance = true;
      out.acceptance = g.contains("evidence") ? g["evidence"].value("state", "PASS_VERIFIED") : "PASS_VERIFIED";
    }
    if (id.rfind("L3", 0) == 0 && passed) evidence = true;
  }
  out.passed = r.exit_code == 0 && out.state == std::string("PASSED:") + kAgentFinalGates && provenance && acceptance && evidence;
  withhold_foreign_evidence(out);
  if (!out.passed) out.acceptance.clear();
  return out;
}

}  // namespace mi::agents
