// `metainfer generate <constraints.toml> [-o DIR] [--json] [overrides...]`: coverage, then a standalone engine
// directory, built and accepted only through the gates. Exit 0 PASS_VERIFIED, 1 a gate failed, 2 bad input,
// 3 not covered (the gap report is printed).
// `--backend agents` (agents_generation.cpp): the same engine directory laid down, then LLM implementers and reviewers
// take its sources through the stage gates, and the final gates judge what they wrote.
#include <chrono>
#include <iostream>

#include "ckb/ckb.h"
#include "common/error.h"
#include "cli/commands.h"
#include "constraints/constraints.h"
#include "coverage/coverage.h"
#include "gates/gates.h"
#include "generator/generator.h"
#include "platform/cpu_info.h"
#include "agents/llm_backend.h"
#include "cli/agents_generation.h"
#include "tune/kernel_tuner.h"
#include "tune/tuning_experience.h"

namespace mi::cli {

void print_report(const gates::Report& report, const generator::Engine& engine, bool json, std::ostream& out,
                  const std::filesystem::path& reports_dir);

void register_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate, build and verify a single-path engine for the constraints");
  struct Options {
    std::string file, out, ckb_dir = ckb::default_ckb_dir().string(), fault, fault_trace;
    constraints::Overrides overrides;
    std::vector<std::string> golden;
    bool json = false, force = false, no_verify = false, tune = false;
    std::string backend = "knowledge";
    AgentsGenerationOptions agents;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("constraints", opts->file, "constraints file (TOML); optional when --model is given");
  constraints::add_override_options(cmd, opts->overrides);
  cmd->add_option("-o,--out", opts->out, "engine directory (default: engines/<checkpoint>-<kernel level>)");
  cmd->add_option("--golden", opts->golden, "golden case directories for PASS_VERIFIED (default: tests/data/golden cases of the same shape)");
  cmd->add_flag("--json", opts->json, "print the result as JSON (last line: engine_dir, binary, state)");
  cmd->add_flag("--force", opts->force, "write into a non-empty directory that is not an engine");
  cmd->add_flag("--no-verify", opts->no_verify, "write the sources only: no build, no gates");
  cmd->add_flag("--tune", opts->tune,
                "time the platform's kernel parameter choices on this machine for the model's shapes, keep the fastest "
                "that passes its check (constraints [tuning], MANIFEST.json \"tuning\", ckb/experience/kernel_tuning.toml)");
  cmd->add_option("--ckb", opts->ckb_dir, "CKB directory");
  cmd->add_option("--inject-fault", opts->fault, "TEST ONLY: attention_scale | fixed_output (shows gates failing)");
  cmd->add_option("--fault-trace", opts->fault_trace, "TEST ONLY: trace.json the fixed_output fault prints");
  cmd->add_option("--backend", opts->backend,
                  "knowledge: the generator writes the sources; agents: LLM implementers and reviewers take them through the "
                  "stage gates (LLM flags below), then the final gates")
      ->check(CLI::IsMember({"knowledge", "agents"}))->capture_default_str();
  add_agents_generation_options(cmd, opts->agents);
  cmd->callback([opts, cmd, &exit_code] {
    const bool agents = opts->backend == "agents";
    if (!agents) {
      // An LLM flag with the knowledge backend would be silently ignored: say so instead.
      const std::vector<std::string> given = agents_generation_flags_given(cmd);
      if (!given.empty()) throw mi::Error(given.front() + " applies to --backend agents only");
    } else {
      if (opts->no_verify) throw mi::Error("--no-verify: --backend agents is judged by the gates in every stage; it cannot skip them");
      if (!opts->fault.empty()) throw mi::Error("--inject-fault is a test of the knowledge backend's gates; not with --backend agents");
      opts->agents.llm.ckb_dir = opts->ckb_dir;
      opts->agents.golden = opts->golden;
      agents::make_backend(backend_config(opts->agents.llm));  // a missing model or key fails here, before anything is written
    }
    const ckb::Ckb ckb = ckb::load(opts->ckb_dir);
    const std::filesystem::path experience = std::filesystem::path(opts->ckb_dir) / "experience" / "kernel_tuning.toml";
    nlohmann::json tuning_report;
    // Without --tune, what the tuner measured before on this kind of CPU (tune/tuning_experience.h).
    coverage::Plan plan = opts->tune ? coverage::plan_for(ckb, opts->file, opts->overrides)
                                     : tune::plan_with_experience(ckb, experience, opts->file, opts->overrides, tuning_report);
    if (!opts->tune && tuning_report.is_object())
      for (const auto& [name, entry] : tuning_report.items())
        std::cerr << "generate: " << name << " = " << entry.at("chosen") << " from " << experience.string() << " (measured "
                  << entry.at("experience").at("date").get<std::string>() << " on this CPU; --tune measures again)\n";
    if (opts->tune && plan.covered) {
      const ckb::Platform* platform = ckb.find_platform(plan.platform);
      if (!platform) throw mi::Error("generate --tune: platform " + plan.platform + " is not in the CKB");
      tune::TuneOptions to;
      to.threads = plan.threads;
      to.repo_root = ckb::default_repo_root();
      const tune::TuneResult tuned = tune::tune_kernels(*platform, plan, to);
      plan = tune::plan_with_tuning(ckb, opts->file, opts->overrides, plan, tuned.choice);
      tuning_report = tuned.report;
      tune::record_experience(experience, *platform, plan, tuned);
    }
    if (!plan.covered) {
      if (opts->json) std::cout << nlohmann::json{{"state", "NOT_COVERED"}, {"plan", plan.to_json()}}.dump() << "\n";
      else std::cout << plan.to_text();
      exit_code = kExitNotCovered;
      return;
    }
    if (opts->fault != "" && opts->fault != "attention_scale" && opts->fault != "fixed_output")
      throw mi::Error("--inject-fault: expected attention_scale or fixed_output, got \"" + opts->fault + "\"");
    if (opts->fault == "fixed_output" && opts->fault_trace.empty()) throw mi::Error("--inject-fault fixed_output needs --fault-trace");
    generator::GenerateOptions go;
    go.out = opts->out.empty() ? std::filesystem::path("engines") / generator::engine_name(plan) : std::filesystem::path(opts->out);
    go.force = opts->force;
    go.fault = opts->fault;
    go.fault_trace = opts->fault_trace;
    go.tuning_report = tuning_report;
    const auto t0 = std::chrono::steady_clock::now();
    const generator::Engine engine = generator::write_engine(ckb, plan, go);
    const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!opts->json) std::cerr << "generated " << engine.dir.string() << " (" << engine.manifest.at("files").size() << " files, " << gen_s << " s)\n";
    if (agents) {
      exit_code = run_agents_generation(ckb, plan, engine, opts->agents, opts->json, std::cout);
      return;
    }
    if (opts->no_verify) {
      std::cout << nlohmann::json{{"engine_dir", engine.dir.string()}, {"binary", engine.binary.string()}, {"state", "GENERATED"}}.dump() << "\n";
      exit_code = kExitOk;
      return;
    }
    gates::GateOptions gopts;
    gopts.threads = plan.threads;
    for (const auto& gdir : opts->golden) gopts.golden_cases.push_back(gdir);
    const gates::Report report = gates::verify_engine(engine, gopts);
    print_report(report, engine, opts->json, std::cout, gates::reports_directory(engine, gopts));
    exit_code = report.failed() ? kExitFailure : kExitOk;  // PASS_VERIFIED or PASS_VERIFIED_ORACLE
  });
}

}  // namespace mi::cli
