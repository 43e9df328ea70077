// Every `metainfer` subcommand lives in its own cmd_<name>.cpp and registers itself here; main.cpp lists them.
// A command's callback stores its exit status in `exit_code`; an mi::Error escaping a callback is bad input
// (exit 2, the message printed as "metainfer: error: ...").
#pragma once
#include <CLI/CLI.hpp>

namespace mi::cli {

// Exit statuses shared by all subcommands (documented in README "CLI reference").
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // a check failed (lint findings, a failing gate); standard output
                                            // could not be written (main.cpp, common/output_check.h)
inline constexpr int kExitBadInput = 2;     // bad flags, constraints, checkpoint or file
inline constexpr int kExitNotCovered = 3;   // the CKB does not cover the constraints

void register_platform_command(CLI::App& app, int& exit_code);
void register_ckb_command(CLI::App& app, int& exit_code);
void register_plan_command(CLI::App& app, int& exit_code);
void register_emit_command(CLI::App& app, int& exit_code);
void register_synth_model_command(CLI::App& app, int& exit_code);
void register_generate_command(CLI::App& app, int& exit_code);
void register_verify_command(CLI::App& app, int& exit_code);
void register_tokenize_commands(CLI::App& app, int& exit_code);
void register_chat_template_command(CLI::App& app, int& exit_code);
void register_oracle_command(CLI::App& app, int& exit_code);
void register_bench_command(CLI::App& app, int& exit_code);
void register_serve_bench_command(CLI::App& app, int& exit_code);
void register_agents_command(CLI::App& app, int& exit_code);
void register_skill_command(CLI::App& app, int& exit_code);
void register_evolve_command(CLI::App& app, int& exit_code);
// Added by later work (one line each in main.cpp): tokenize, detokenize, chat-template, generate, verify.

}  // namespace mi::cli
