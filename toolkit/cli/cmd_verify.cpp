// `metainfer verify DIR [--golden CASE_DIR ...] [--hide PATH ...] [--only GATE] [--allow-modified-sources [--prebuilt]]
// [--draw-seed S] [--json]`: run the gates on an engine directory.
#include <algorithm>
#include <iostream>

#include <sys/prctl.h>

#include "cli/commands.h"
#include "common/error.h"
#include "gates/gates.h"
#include "generator/generator.h"

namespace mi::cli {

void print_report(const gates::Report& report, const generator::Engine& engine, bool json, std::ostream& out,
                  const std::filesystem::path& reports_dir) {
  if (json) {
    nlohmann::json j = report.to_json();
    j["engine_dir"] = engine.dir.string();
    j["binary"] = engine.binary.string();
    j["report"] = (reports_dir / "verification.json").string();
    out << j.dump() << "\n";
    return;
  }
  for (const auto& g : report.gates)
    out << (g.passed ? "  pass  " : "  FAIL  ") << g.id << "  (" << g.duration_s << " s)  " << g.summary << "\n";
  out << report.state << "  " << engine.dir.string() << "\n  binary: " << engine.binary.string()
      << "\n  report: " << (reports_dir / "verification.md").string() << "\n";
}

void register_verify_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("verify", "Run the gates (L0, L1/L2 per stage, PASS_VERIFIED, L3) on an engine directory");
  struct Options {
    std::string dir, only, reports_dir, draw_seed;
    std::vector<std::string> golden, hide;
    int threads = 2;
    bool json = false, allow_modified = false, prebuilt = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("engine_dir", opts->dir, "engine directory (holds MANIFEST.json)")->required();
  cmd->add_option("--golden", opts->golden, "golden case directories (default: tests/data/golden cases of the same shape)");
  cmd->add_option("--hide", opts->hide,
                  "a path the engine under test must not see, besides the installed reference trees (repeatable; the "
                  "agents' final gates pass their --reference trees)");
  cmd->add_option("--only", opts->only, "run only gates whose id starts with this (e.g. L0, L1, PASS_VERIFIED, L3)");
  cmd->add_option("--threads", opts->threads, "engine threads for the gate runs")->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the report as one JSON object");
  CLI::Option* draw_seed = cmd->add_option(
      "--draw-seed", opts->draw_seed,
      "with --only: seed of the acceptance gate's random checkpoints (perturbed copy, fresh weights), replaying the "
      "draws of a run whose PASS_VERIFIED evidence reported this draw_seed (default: fresh entropy)");
  cmd->add_option("--reports-dir", opts->reports_dir,
                  "write verification.{json,md} here instead of DIR/reports (the agents' stage gate keeps them out of the "
                  "reach of the agent-written code it runs)");
  cmd->add_flag("--allow-modified-sources", opts->allow_modified,
                "with --only: build and run sources that are not the generated ones (planted-defect tests); their "
                "CMakeLists.txt runs unchecked");
  cmd->add_flag("--prebuilt", opts->prebuilt,
                "with --allow-modified-sources: B0 does not build, it hashes DIR/build as an earlier build left it (the "
                "agents' final gates build agent-written code inside the isolation of agents' commands first)");
  cmd->callback([opts, draw_seed, &exit_code] {
    // The verifier runs code it judges (B0's CMakeLists.txt with --allow-modified-sources, the stage executables) as
    // its own children, under its own user: not dumpable, its /proc entries (its stdout above all, where the report
    // is read from) cannot be opened by them, so they cannot write a verdict in its name. Children get their own
    // dumpable flag back at exec.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    const generator::Engine engine = generator::load_engine(opts->dir);
    gates::GateOptions gopts;
    gopts.threads = opts->threads;
    if (opts->allow_modified && opts->only.empty()) throw mi::Error("--allow-modified-sources needs --only GATE: a full verification always checks the sources");
    if (opts->prebuilt && !opts->allow_modified) throw mi::Error("--prebuilt needs --allow-modified-sources: a full verification always builds");
    gopts.allow_modified_sources = opts->allow_modified;
    gopts.prebuilt = opts->prebuilt;
    for (const auto& g : opts->golden) gopts.golden_cases.push_back(g);
    for (const auto& h : opts->hide) gopts.hidden_paths.push_back(h);
    gopts.reports_dir = opts->reports_dir;
    if (draw_seed->count() > 0) {
      // A known seed means known authenticity checkpoints, which an engine could have been prepared for: a replay is
      // an investigation (--only, ending PASSED:<prefix>), never a PASS_VERIFIED.
      if (opts->only.empty()) throw mi::Error("--draw-seed needs --only GATE: a full verification always draws fresh checkpoints");
      const std::string& s = opts->draw_seed;
      const bool digits = !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
      unsigned long long seed = 0;
      bool in_range = false;
      if (digits) try {
          seed = std::stoull(s, nullptr, 10);
          in_range = true;
        } catch (const std::exception&) {
        }
      if (!in_range) throw mi::Error("--draw-seed: expected an unsigned 64-bit decimal integer, got '" + s + "'");
      gopts.draw_seed = seed;
    }
    const gates::Report report = gates::verify_engine(engine, gopts, opts->only);
    print_report(report, engine, opts->json, std::cout, gates::reports_directory(engine, gopts));
    exit_code = report.failed() ? kExitFailure : kExitOk;
  });
}

}  // namespace mi::cli
