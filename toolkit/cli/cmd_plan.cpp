// `metainfer plan [constraints.toml] [--json] [overrides...]`: coverage detection. Exit 0 covered, 3 not covered,
// 2 bad constraints or checkpoint.
#include <iostream>

#include "ckb/ckb.h"
#include "cli/commands.h"
#include "constraints/constraints.h"
#include "coverage/coverage.h"
#include "platform/cpu_info.h"

namespace mi::cli {

void register_plan_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("plan", "Check constraints against the CKB: covering components and gaps");
  struct Options {
    std::string file;
    constraints::Overrides overrides;
    std::string ckb_dir = ckb::default_ckb_dir().string();
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("constraints", opts->file, "constraints file (TOML); optional when --model is given");
  constraints::add_override_options(cmd, opts->overrides);
  cmd->add_option("--ckb", opts->ckb_dir, "CKB directory");
  cmd->add_flag("--json", opts->json, "print the plan as one JSON object (format metainfer-plan/1)");
  cmd->callback([opts, &exit_code] {
    const ckb::Ckb ckb = ckb::load(opts->ckb_dir);
    const coverage::Plan plan = coverage::plan_for(ckb, opts->file, opts->overrides);
    if (opts->json) std::cout << plan.to_json().dump(2) << "\n";
    else std::cout << plan.to_text();
    exit_code = plan.covered ? kExitOk : kExitNotCovered;
  });
}

}  // namespace mi::cli
