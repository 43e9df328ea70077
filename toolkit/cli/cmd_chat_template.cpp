// `metainfer chat-template`: render a conversation through a model's chat template (components/chat) exactly as
// Hugging Face's apply_chat_template would, e.g. to check the prompt an engine will see.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "common/error.h"

namespace mi::cli {

namespace {

// JSON read with key order kept (tojson in templates prints keys in the order the file gives them).
nlohmann::ordered_json read_ordered_json(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(flag, ": ", path, ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::ordered_json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(flag, ": ", path, ": not valid JSON (byte ", e.byte, "): ", e.what());
  }
}

}  // namespace

void register_chat_template_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("chat-template", "Render messages through a tokenizer's chat template");
  cmd->footer(
      "Prints the rendered prompt exactly (no trailing newline added), as Hugging Face's apply_chat_template\n"
      "renders it from tokenizer_config.json's chat_template.\n"
      "--messages: a JSON array of {\"role\", \"content\", ...} objects; --tools: a JSON array of tool schemas.\n"
      "Exit status: 0 ok; 1 standard output could not be written; 2 bad input (unreadable/invalid JSON, a template\n"
      "error or raise_exception(), naming the file).");
  struct Options {
    std::string tokenizer_dir, messages_file, tools_file, enable_thinking;
    bool add_generation_prompt = false;
  };
  auto opts = std::make_shared<Options>();
  cmd->add_option("--tokenizer", opts->tokenizer_dir, "directory with tokenizer_config.json")->required();
  cmd->add_option("--messages", opts->messages_file, "JSON file: the messages array")->required();
  cmd->add_flag("--add-generation-prompt", opts->add_generation_prompt,
                "end with the header of an assistant turn (add_generation_prompt=True)");
  auto* tools_opt = cmd->add_option("--tools", opts->tools_file, "JSON file: the tools array");
  auto* thinking_opt = cmd->add_option("--enable-thinking", opts->enable_thinking,
                                       "pass enable_thinking=true|false to the template")
                           ->check(CLI::IsMember({"true", "false"}));
  cmd->callback([opts, tools_opt, thinking_opt, &exit_code] {
    // Template errors are bad input naming tokenizer_config.json, whichever part of the renderer raised them.
    const std::string config_file = (std::filesystem::path(opts->tokenizer_dir) / "tokenizer_config.json").string();
    auto naming_the_file = [&](auto&& f) {
      try {
        return f();
      } catch (const Error& e) {
        if (std::string(e.what()).find("tokenizer_config.json") != std::string::npos) throw;
        fail(config_file, ": ", e.what());
      } catch (const std::exception& e) {
        fail(config_file, ": ", e.what());
      }
    };
    const auto tmpl = naming_the_file([&] { return chat::ChatTemplate::load(opts->tokenizer_dir); });
    const nlohmann::ordered_json messages = read_ordered_json(opts->messages_file, "--messages");
    if (!messages.is_array()) fail("--messages: ", opts->messages_file, ": expected a JSON array of messages");
    nlohmann::ordered_json tools;  // null: no tools
    if (tools_opt->count()) {
      tools = read_ordered_json(opts->tools_file, "--tools");
      if (!tools.is_array()) fail("--tools: ", opts->tools_file, ": expected a JSON array of tool schemas");
    }
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (thinking_opt->count()) extra["enable_thinking"] = opts->enable_thinking == "true";
    const std::string prompt =
        naming_the_file([&] { return tmpl.render(messages, tools, opts->add_generation_prompt, extra); });
    std::cout << prompt << std::flush;
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
