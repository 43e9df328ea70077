// `metainfer emit [constraints.toml] -o DIR [--namespace NS] [overrides...]`: writes only the generated model sources
// (DIR/engine_config.h, DIR/model.h) for the constraints, nothing else: no components, no build, no gates. Unit tests
// compile the real emitted model against the in-tree components this way (CMake runs it for every golden case), so
// the emitted model.h is the one forward assembly the project has. Exit 0 written, 3 not covered, 2 bad input.
#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>

#include "ckb/ckb.h"
#include "cli/commands.h"
#include "common/error.h"
#include "constraints/constraints.h"
#include "coverage/coverage.h"
#include "generator/manifest.h"
#include "generator/model_emitter.h"

namespace mi::cli {

void register_emit_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("emit", "Write the generated model sources (model.h, engine_config.h) only");
  struct Options {
    std::string file, out, cpp_namespace = "engine";
    constraints::Overrides overrides;
    std::string ckb_dir = ckb::default_ckb_dir().string();
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("constraints", opts->file, "constraints file (TOML); optional when --model is given");
  constraints::add_override_options(cmd, opts->overrides);
  cmd->add_option("-o,--out", opts->out, "directory for engine_config.h and model.h (created; existing files replaced)")
      ->required();
  cmd->add_option("--namespace", opts->cpp_namespace, "C++ namespace of the emitted Model (default: engine)");
  cmd->add_option("--ckb", opts->ckb_dir, "CKB directory");
  cmd->callback([opts, &exit_code] {
    const std::string& ns = opts->cpp_namespace;
    bool identifier = !ns.empty() && !std::isdigit(static_cast<unsigned char>(ns[0]));
    for (char c : ns) identifier = identifier && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!identifier) fail("--namespace: expected a C++ identifier, got '", ns, "'");
    const ckb::Ckb ckb = ckb::load(opts->ckb_dir);
    const coverage::Plan plan = coverage::plan_for(ckb, opts->file, opts->overrides);
    if (!plan.covered) {
      std::cerr << plan.to_text();
      exit_code = kExitNotCovered;
      return;
    }
    const ckb::Family* family = ckb.find_family(plan.family);
    if (!family) fail("emit: no family ", plan.family);
    const generator::EmitOptions eo{"emitted-" + plan.family, ns};
    const std::filesystem::path out = opts->out;
    std::filesystem::create_directories(out);
    // Unchanged files are left alone, so a rebuild after a toolkit change recompiles only models whose text changed.
    auto write_if_changed = [](const std::filesystem::path& file, const std::string& text) {
      std::ifstream in(file, std::ios::binary);
      const std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.is_open() || old != text) generator::write_file(file, text);
    };
    write_if_changed(out / "engine_config.h", generator::emit_engine_config(*family, plan, eo));
    write_if_changed(out / "model.h", generator::emit_model(*family, plan, eo));
    std::cout << "emitted " << (out / "model.h").string() << " and engine_config.h (" << plan.architecture << ", "
              << plan.kernel_level << ", namespace " << ns << ")\n";
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
