// `metainfer ckb check [--ckb DIR] [--root DIR] [--json]`: lint the Contract Knowledge Base.
#include <iostream>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"
#include "ckb/lint.h"
#include "cli/commands.h"

namespace mi::cli {

void register_ckb_command(CLI::App& app, int& exit_code) {
  auto* ckb_cmd = app.add_subcommand("ckb", "Contract Knowledge Base tools");
  ckb_cmd->require_subcommand(1);
  auto* check = ckb_cmd->add_subcommand("check", "Lint the CKB: dangling references, missing tests, unmapped weights");
  struct Options {
    std::string ckb_dir = ckb::default_ckb_dir().string();
    std::string root = ckb::default_repo_root().string();
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  check->add_option("--ckb", opts->ckb_dir, "CKB directory (default: the source tree's ckb/, or $METAINFER_CKB)");
  check->add_option("--root", opts->root, "repository root that component and test paths are relative to");
  check->add_flag("--json", opts->json, "print findings as JSON");
  check->callback([opts, &exit_code] {
    const ckb::Ckb ckb = ckb::load(opts->ckb_dir);
    const auto findings = ckb::lint(ckb, opts->root);
    int errors = 0, warnings = 0;
    for (const auto& f : findings) (f.severity == "error" ? errors : warnings)++;
    if (opts->json) {
      nlohmann::json j = {{"ckb", opts->ckb_dir}, {"version", ckb.version}, {"errors", errors}, {"warnings", warnings},
                          {"findings", nlohmann::json::array()}};
      for (const auto& f : findings)
        j["findings"].push_back({{"severity", f.severity}, {"file", f.file}, {"field", f.field}, {"message", f.message}});
      std::cout << j.dump(2) << "\n";
    } else {
      for (const auto& f : findings)
        std::cout << f.file << ": " << f.severity << ": field '" << f.field << "': " << f.message << "\n";
      std::cout << "ckb " << ckb.version << ": " << ckb.contracts.size() << " contracts, " << ckb.families.size()
                << " families, " << ckb.platforms.size() << " platforms, " << ckb.signals.size() << " signals, "
                << ckb.experience.size() << " experience entries, " << ckb.gates.size() << " gates, "
                << ckb.roles.size() << " roles: " << errors << " error(s), " << warnings << " warning(s)\n";
    }
    exit_code = errors ? kExitFailure : kExitOk;
  });
}

}  // namespace mi::cli
