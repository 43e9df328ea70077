#include "chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "chat/python_text.h"
#include "chat/template_error.h"
#include "chat/template_lexer.h"
#include "chat/template_parser.h"
#include "common/error.h"

namespace mi::chat {
namespace {

// A special token in tokenizer_config.json: "text", {"content": "text", ...} (AddedToken), or null.
std::optional<std::string> token_text(const nlohmann::ordered_json& token, const std::string& label,
                                      const std::string& field) {
  if (token.is_null()) return std::nullopt;
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return token["content"].get<std::string>();
  }
  fail(label, ": field '", field, "': expected a string, {\"content\": string} or null");
}

std::string select_template(const nlohmann::ordered_json& config, const std::string& label) {
  if (!config.is_object() || !config.contains("chat_template")) {
    fail(label, ": field 'chat_template' is missing (this tokenizer has no chat template)");
  }
  const auto& field = config["chat_template"];
  if (field.is_string()) return field.get<std::string>();
  if (field.is_array()) {
    // Named templates ([{"name": "default", "template": "..."}, {"name": "tool_use", ...}]): use "default".
    for (const auto& entry : field) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    fail(label, ": field 'chat_template': a list of named templates without a \"default\" entry");
  }
  fail(label, ": field 'chat_template': expected a string or a list of {\"name\", \"template\"} objects");
}

}  // namespace

ChatTemplate ChatTemplate::load(const std::filesystem::path& tokenizer_dir) {
  const std::filesystem::path path = tokenizer_dir / "tokenizer_config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(path.string(), ": not valid JSON (byte ", e.byte, "): ", e.what());
  }
  return from_config(config, path.string());
}

ChatTemplate ChatTemplate::from_config(const nlohmann::ordered_json& config, const std::string& label) {
  const std::string source = select_template(config, label);
  nlohmann::ordered_json constants = nlohmann::ordered_json::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(name)) continue;
    if (auto text = token_text(config[name], label, name)) constants[name] = *text;
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& token : config["additional_special_tokens"]) {
      if (auto text = token_text(token, label, "additional_special_tokens")) list.push_back(*text);
    }
    constants["additional_special_tokens"] = list;
  }
  return ChatTemplate(source, constants, label + " chat_template");
}

ChatTemplate::ChatTemplate(const std::string& source, const nlohmann::ordered_json& constants,
                           const std::string& label)
    : label_(label), source_(source) {
  if (!py::is_valid_utf8(source)) fail("chat template ", label, ": the template is not valid UTF-8");
  try {
    body_ = std::make_shared<const Body>(parse_template(source));
  } catch (const TemplateError& e) {
    fail("chat template ", label, ": ", e.what());
  }
  if (!constants.is_object()) fail("chat template ", label, ": constants must be a JSON object");
  try {
    for (const auto& [key, value] : constants.items()) constants_.set(key, Value::from_json(value));
  } catch (const ValueError& e) {
    fail("chat template ", label, ": constants: ", e.what());
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_vars) const {
  if (!messages.is_array()) fail("chat template ", label_, ": messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) fail("chat template ", label_, ": tools must be a JSON array or null");
  if (!extra_vars.is_null() && !extra_vars.is_object()) {
    fail("chat template ", label_, ": extra variables must be a JSON object");
  }
  // The variables apply_chat_template passes: messages, tools (None without tools), documents (None),
  // add_generation_prompt, the special tokens, then the caller's keyword arguments.
  Dict variables = constants_;
  try {
    variables.set("messages", Value::from_json(messages));
    variables.set("tools", Value::from_json(tools));
    variables.set("documents", Value::none());
    variables.set("add_generation_prompt", Value::boolean(add_generation_prompt));
    if (extra_vars.is_object()) {
      for (const auto& [key, value] : extra_vars.items()) variables.set(key, Value::from_json(value));
    }
  } catch (const ValueError& e) {
    fail("chat template ", label_, ": input: ", e.what());
  }
  try {
    return render_template(*body_, variables, limits_);
  } catch (const TemplateError& e) {
    fail("chat template ", label_, ": ", e.what());
  }
}

}  // namespace mi::chat
