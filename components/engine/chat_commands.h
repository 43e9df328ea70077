// Chat on the engine's command line, for engines generated with runtime.chat = true (engine_features.h names
// ChatTemplateCommands; the others get cli.h's NoChat and carry no chat template interpreter at all):
//
//   ENGINE generate --prompt TEXT --chat ...   the prompt as one user message, rendered by the checkpoint's template
//   ENGINE chat --model DIR ...                interactive multi-turn chat on stdin/stdout (/exit or EOF ends it)
//
// The template writes every special token itself (BOS included), so the rendered text is encoded without the
// tokenizer's post-processor, as transformers' apply_chat_template(tokenize=True) does.
//
// The conversation (the messages, the template, the tokenizer, the line loop) is non-template code in
// chat_commands.cpp, compiled once into engine_core; only the generation call on the model is instantiated here.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "engine/cli.h"

namespace mi::engine {

// The `chat` command's state without the model: the checkpoint's tokenizer and chat template, and the messages so
// far (chat_commands.cpp).
class ChatConversation {
 public:
  // Loads the tokenizer and the chat template: UsageError naming the file when either is missing or broken.
  explicit ChatConversation(const std::string& model_dir);
  ~ChatConversation();

  // Reads user lines from `in` until /exit or the end of the input; each is added to the conversation, the whole
  // conversation is rendered and encoded, `generate_turn` generates the reply (streamed to `out`), which is added.
  using TurnGenerator = std::function<GenerationResult(const GenerationRequest&, const GenerationCallbacks&)>;
  int run(const EngineInfo& info, const cli_detail::Options& o, std::istream& in, std::ostream& out,
          const TurnGenerator& generate_turn);

  const tok::Tokenizer& tokenizer() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct ChatTemplateCommands {
  static constexpr bool available = true;

  // `generate --chat`: `prompt` as the conversation's one user message, with the generation prompt appended.
  static std::vector<int32_t> encode_user_prompt(const std::string& model_dir, const tok::Tokenizer& tokenizer,
                                                 const std::string& prompt);

  // `chat`: each input line is a user turn; the whole conversation is re-rendered and generated from each turn.
  template <EngineModel M>
  static int run(const EngineInfo& info, const cli_detail::Options& o, std::istream& in, std::ostream& out,
                 std::ostream&) {
    using namespace cli_detail;
    require_tokenizer(o.model_dir, "chat");
    ChatConversation conversation(o.model_dir);
    M model = load_model<M>(o.model_dir, runtime_options(o, info));
    const GenerationLimits limits = generation_limits(info, o);
    return conversation.run(info, o, in, out, [&](const GenerationRequest& request, const GenerationCallbacks& callbacks) {
      return generate(model, &conversation.tokenizer(), limits, request, callbacks);
    });
  }
};

}  // namespace mi::engine
