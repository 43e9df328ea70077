// Chat on the engine's command line (engine/chat_commands.h), the part that does not call the model: the chat
// template, the messages and the line loop. Compiled once into engine_core of engines generated with runtime.chat.
#include "engine/chat_commands.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace mi::engine {
namespace {

// The checkpoint's chat template; a missing or unreadable one is bad input naming the file.
chat::ChatTemplate load_template(const std::string& model_dir, const std::string& what) {
  try {
    return chat::ChatTemplate::load(model_dir);
  } catch (const Error& e) {
    throw UsageError(what + " needs the checkpoint's chat template: " + e.what());
  }
}

std::string render(const chat::ChatTemplate& tmpl, const nlohmann::ordered_json& messages, const std::string& model_dir) {
  try {
    return tmpl.render(messages, nullptr, true, nlohmann::ordered_json::object());
  } catch (const std::exception& e) {
    throw UsageError(naming_file(e.what(), std::filesystem::path(model_dir) / "tokenizer_config.json"));
  }
}

}  // namespace

std::vector<int32_t> ChatTemplateCommands::encode_user_prompt(const std::string& model_dir,
                                                              const tok::Tokenizer& tokenizer,
                                                              const std::string& prompt) {
  const chat::ChatTemplate tmpl = load_template(model_dir, "--chat");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", prompt}});
  const std::string rendered = render(tmpl, messages, model_dir);
  try {
    return tokenizer.encode(rendered, false);
  } catch (const Error& e) {
    throw UsageError(std::string("--prompt: ") + e.what());
  }
}

struct ChatConversation::State {
  tok::Tokenizer tokenizer;
  chat::ChatTemplate tmpl;
};

ChatConversation::ChatConversation(const std::string& model_dir) {
  tok::Tokenizer tokenizer = cli_detail::load_tokenizer(model_dir);
  chat::ChatTemplate tmpl = load_template(model_dir, "chat");
  state_ = std::make_unique<State>(State{std::move(tokenizer), std::move(tmpl)});
}

ChatConversation::~ChatConversation() = default;

const tok::Tokenizer& ChatConversation::tokenizer() const { return state_->tokenizer; }

int ChatConversation::run(const EngineInfo& info, const cli_detail::Options& o, std::istream& in, std::ostream& out,
                          const TurnGenerator& generate_turn) {
  using namespace cli_detail;
  const bool interactive = &in == &std::cin && ::isatty(STDIN_FILENO);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::string line;
  while (true) {
    if (interactive) out << "> " << std::flush;
    if (!std::getline(in, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    const std::string rendered = render(state_->tmpl, messages, o.model_dir);
    GenerationRequest request;
    try {
      request.prompt_ids = state_->tokenizer.encode(rendered, false);
    } catch (const Error& e) {
      throw UsageError(std::string("chat input: ") + e.what());
    }
    request.sampling = o.sampling;
    request.stop = o.stop;
    try {
      request.max_new_tokens = budget(o, info, request.prompt_ids.size());
    } catch (const UsageError& e) {
      throw UsageError(std::string("the conversation no longer fits: ") + e.what() + "; start a new chat");
    }
    GenerationCallbacks callbacks;
    callbacks.on_text = [&](std::string_view text) {
      errno = 0;
      out << text << std::flush;
      check_output(out, errno);
    };
    const GenerationResult r = generate_turn(request, callbacks);
    errno = 0;
    out << "\n" << std::flush;
    check_output(out, errno);
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
  }
  return 0;
}

}  // namespace mi::engine
