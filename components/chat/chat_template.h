// Chat templates: a model's conversation -> prompt text, rendered exactly as Hugging Face's
// tokenizer.apply_chat_template renders it (Jinja2 with trim_blocks, lstrip_blocks, the loopcontrols
// extension, a tojson that keeps non-ASCII, raise_exception(), and the special tokens as variables).
//
//   auto tmpl = mi::chat::ChatTemplate::load("/models/qwen3");       // reads tokenizer_config.json
//   std::string prompt = tmpl.render(messages, nullptr, true, {{"enable_thinking", false}});
//
// JSON inputs are nlohmann::ordered_json because key order is observable: `tool | tojson` prints a tool's
// keys in the order the caller gave them (Python dicts keep insertion order).
//
// Every failure is an mi::Error whose message starts with "chat template <label>: line L:C: " followed by the
// error (Python/Jinja2 wording, e.g. "TemplateError: <raise_exception message>" or "UndefinedError: 'dict
// object' has no attribute 'content'"), or names the config field that is wrong.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/template_ast.h"
#include "chat/template_renderer.h"

namespace mi::chat {

class ChatTemplate {
 public:
  // Reads <tokenizer_dir>/tokenizer_config.json: `chat_template` (a string, or a list of {"name", "template"}
  // entries of which "default" is used) and the special tokens (bos_token, eos_token, unk_token, sep_token,
  // pad_token, cls_token, mask_token: strings or {"content": ...}; null ones stay undefined, as in HF;
  // additional_special_tokens as a list).
  static ChatTemplate load(const std::filesystem::path& tokenizer_dir);
  // The same from an already parsed tokenizer_config.json; `label` names it in error messages.
  static ChatTemplate from_config(const nlohmann::ordered_json& config, const std::string& label);
  // A template from source text; `constants` (a JSON object) become variables of every render.
  ChatTemplate(const std::string& source, const nlohmann::ordered_json& constants, const std::string& label);

  // messages: JSON array of message objects. tools: JSON array, or null when there are none (the template
  // then sees tools = None). extra_vars: JSON object of further variables (enable_thinking, date_string, ...)
  // that override the defaults.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_vars) const;

  void set_limits(const RenderLimits& limits) { limits_ = limits; }
  const std::string& source() const { return source_; }
  const std::string& label() const { return label_; }

 private:
  std::string label_;
  std::string source_;
  std::shared_ptr<const Body> body_;
  Dict constants_;
  RenderLimits limits_;
};

}  // namespace mi::chat
