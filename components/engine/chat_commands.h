// Chat on the engine's command line, for engines generated with runtime.chat = true (engine_features.h names
// ChatTemplateCommands; the others get cli.h's NoChat and carry no chat template interpreter at all):
//
//   ENGINE generate --prompt TEXT --chat ...   the prompt as one user message, rendered by the checkpoint's template
//   ENGINE chat --model DIR ...                interactive multi-turn chat on stdin/stdout (/exit or EOF ends it)
//
// The template writes every special token itself (BOS included), so the rendered text is encoded without the
// tokenizer's post-processor, as transformers' apply_chat_template(tokenize=True) does.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/cli.h"

namespace mi::engine {

struct ChatTemplateCommands {
  static constexpr bool available = true;

  // The checkpoint's chat template; a missing or unreadable one is bad input naming the file.
  static chat::ChatTemplate load_template(const std::string& model_dir, const std::string& what) {
    try {
      return chat::ChatTemplate::load(model_dir);
    } catch (const Error& e) {
      throw UsageError(what + " needs the checkpoint's chat template: " + e.what());
    }
  }

  static std::string render(const chat::ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                            const std::string& model_dir) {
    try {
      return tmpl.render(messages, nullptr, true, nlohmann::ordered_json::object());
    } catch (const std::exception& e) {
      throw UsageError(naming_file(e.what(), std::filesystem::path(model_dir) / "tokenizer_config.json"));
    }
  }

  // `generate --chat`: `prompt` as the conversation's one user message, with the generation prompt appended.
  static std::vector<int32_t> encode_user_prompt(const std::string& model_dir, const tok::Tokenizer& tokenizer,
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

  // `chat`: each input line is a user turn; the whole conversation is re-rendered and generated from each turn.
  template <EngineModel M>
  static int run(const EngineInfo& info, const cli_detail::Options& o, std::istream& in, std::ostream& out,
                 std::ostream&) {
    using namespace cli_detail;
    require_tokenizer(o.model_dir, "chat");
    const tok::Tokenizer tokenizer = load_tokenizer(o.model_dir);
    const chat::ChatTemplate tmpl = load_template(o.model_dir, "chat");
    M model = load_model<M>(o.model_dir, runtime_options(o, info));
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
      const std::string rendered = render(tmpl, messages, o.model_dir);
      GenerationRequest request;
      try {
        request.prompt_ids = tokenizer.encode(rendered, false);
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
      const GenerationResult r = generate(model, &tokenizer, generation_limits(info, o), request, callbacks);
      errno = 0;
      out << "\n" << std::flush;
      check_output(out, errno);
      messages.push_back({{"role", "assistant"}, {"content", r.text}});
    }
    return 0;
  }
};

}  // namespace mi::engine
