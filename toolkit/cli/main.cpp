// metainfer: constraints in, a verified single-path inference engine out. See README.md "CLI reference".
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"
#include "common/output_check.h"
#include "io/safetensors.h"

namespace {
int run(int argc, char** argv);
}  // namespace

// Every command's output is checked: a stdout that cannot be written (full disk, closed, a reader gone) ends in
// exit 1 with "metainfer: error: cannot write to standard output: ..." (common/output_check.h). A checkpoint file
// truncated while metainfer maps it ends in exit 1 naming the file (io/safetensors.h), not a SIGBUS death.
int main(int argc, char** argv) {
  mi::prepare_standard_streams();
  mi::io::install_mapped_file_sigbus_handler("metainfer", "metainfer");
  const int status = run(argc, argv);
  return mi::finish_standard_output("metainfer", status);
}

namespace {

int run(int argc, char** argv) {
  CLI::App app{"metainfer: turns deployment constraints into a compact, verified LLM inference engine", "metainfer"};
  app.require_subcommand(1);
  app.set_version_flag("--version", METAINFER_VERSION);
  int exit_code = mi::cli::kExitOk;

  mi::cli::register_platform_command(app, exit_code);
  mi::cli::register_ckb_command(app, exit_code);
  mi::cli::register_plan_command(app, exit_code);
  mi::cli::register_emit_command(app, exit_code);
  mi::cli::register_synth_model_command(app, exit_code);
  mi::cli::register_generate_command(app, exit_code);
  mi::cli::register_verify_command(app, exit_code);
  mi::cli::register_tokenize_commands(app, exit_code);
  mi::cli::register_chat_template_command(app, exit_code);
  mi::cli::register_oracle_command(app, exit_code);
  mi::cli::register_bench_command(app, exit_code);
  mi::cli::register_serve_bench_command(app, exit_code);
  mi::cli::register_agents_command(app, exit_code);
  mi::cli::register_skill_command(app, exit_code);
  mi::cli::register_evolve_command(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);  // prints help or the parse error
    return status == 0 ? 0 : mi::cli::kExitBadInput;
  } catch (const mi::Error& e) {
    std::cerr << "metainfer: error: " << e.what() << "\n";
    return exit_code != mi::cli::kExitOk ? exit_code : mi::cli::kExitBadInput;
  } catch (const std::exception& e) {  // a bug, not bad input: say so rather than abort
    std::cerr << "metainfer: internal error: " << e.what() << "\n";
    return mi::cli::kExitFailure;
  }
  return exit_code;
}

}  // namespace
