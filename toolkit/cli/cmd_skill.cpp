// `metainfer skill export DIR [--ckb DIR]`: the workflow as an Agent Skill (DIR/metainfer/SKILL.md, role references,
// scripts calling this binary), for users of an agent harness (toolkit/agents/skill_export.h).
#include <iostream>

#include <nlohmann/json.hpp>

#include "agents/skill_export.h"
#include "ckb/ckb.h"
#include "cli/commands.h"

namespace mi::cli {
namespace fs = std::filesystem;

void register_skill_command(CLI::App& app, int& exit_code) {
  auto* skill = app.add_subcommand("skill", "The workflow packaged for agent harnesses");
  skill->require_subcommand(1);
  auto* exp = skill->add_subcommand("export", "Write the Agent Skill (SKILL.md, role references, scripts) to DIR/metainfer/");
  struct Options {
    std::string dir, ckb_dir = ckb::default_ckb_dir().string();
  };
  auto opts = std::make_shared<Options>();
  exp->add_option("dir", opts->dir, "where to write the skill")->required();
  exp->add_option("--ckb", opts->ckb_dir, "CKB whose roles/ are exported");
  exp->callback([opts, &exit_code] {
    // The scripts default to this very binary, by its resolved path.
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) self = "metainfer";
    const fs::path root = agents::export_skill(opts->dir, opts->ckb_dir, self);
    std::cout << nlohmann::json{{"skill", root.string()}}.dump() << "\n";
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
