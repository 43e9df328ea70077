// Differential cases recorded from the real Jinja2 3.1 (tests/unit/chat/make_reference_cases.py, configured
// as Hugging Face configures it): interpreter semantics on small templates (jinja_cases.jsonl) and more
// conversations through the real Qwen3 / Llama 3 templates (model_cases.jsonl: tool calls with dict and
// string arguments, tool messages, reasoning_content and <think> blocks, enable_thinking, system present or
// absent, non-ASCII in tojson, and the inputs those templates reject).
// A rendered case must match byte for byte; an error case must raise, with Jinja2's "Type: message".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/error.h"

namespace {

using nlohmann::ordered_json;

std::vector<ordered_json> read_cases(const std::string& name) {
  const auto path = std::filesystem::path(METAINFER_SOURCE_DIR) / "tests" / "unit" / "chat" / name;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<ordered_json> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) cases.push_back(ordered_json::parse(line));
  }
  EXPECT_FALSE(cases.empty()) << path;
  return cases;
}

// Renders and compares with the case's `rendered`, or checks the error matches `error_type: error`.
void expect_case(const ordered_json& c, const std::function<std::string()>& render) {
  if (c.contains("error")) {
    const std::string type = c["error_type"].get<std::string>();
    const std::string expected = type + ": " + c["error"].get<std::string>();
    try {
      const std::string rendered = render();
      ADD_FAILURE() << "expected error \"" << expected << "\", rendered " << ordered_json(rendered).dump();
    } catch (const mi::Error& e) {
      const std::string message = e.what();
      if (type == "TemplateSyntaxError" || type == "TemplateAssertionError") {
        // Rejected when parsed; the wording is ours (it names the construct), the position must be there.
        EXPECT_NE(message.find(": line "), std::string::npos) << message;
      } else {
        EXPECT_NE(message.find(expected), std::string::npos) << "error message: " << message
                                                             << "\nexpected to contain: " << expected;
      }
    }
    return;
  }
  try {
    EXPECT_EQ(render(), c["rendered"].get<std::string>());
  } catch (const mi::Error& e) {
    ADD_FAILURE() << "unexpected error: " << e.what();
  }
}

TEST(ChatTemplateReference, JinjaSemantics) {
  const auto cases = read_cases("jinja_cases.jsonl");
  for (size_t i = 0; i < cases.size(); ++i) {
    const ordered_json& c = cases[i];
    SCOPED_TRACE("jinja_cases.jsonl line " + std::to_string(i + 1) + ": " + c["template"].dump());
    const ordered_json& vars = c["vars"];
    expect_case(c, [&] {
      const mi::chat::ChatTemplate tmpl(c["template"].get<std::string>(), ordered_json::object(), "case");
      const ordered_json messages = vars.contains("messages") ? vars["messages"] : ordered_json::array();
      const ordered_json tools = vars.contains("tools") ? vars["tools"] : ordered_json();
      return tmpl.render(messages, tools, vars.value("add_generation_prompt", false), vars);
    });
  }
}

TEST(ChatTemplateReference, ModelConversations) {
  const auto cases = read_cases("model_cases.jsonl");
  for (const std::string family : {"qwen3", "llama3"}) {
    const auto dir = std::filesystem::path(METAINFER_TOKENIZERS) / family;
    ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json"))
        << dir << "/tokenizer_config.json is missing: run setup.sh";
  }
  const auto qwen3 = mi::chat::ChatTemplate::load(std::filesystem::path(METAINFER_TOKENIZERS) / "qwen3");
  const auto llama3 = mi::chat::ChatTemplate::load(std::filesystem::path(METAINFER_TOKENIZERS) / "llama3");
  for (size_t i = 0; i < cases.size(); ++i) {
    const ordered_json& c = cases[i];
    SCOPED_TRACE("model_cases.jsonl line " + std::to_string(i + 1) + ": " + c["family"].get<std::string>() + " " +
                 c["messages"].dump());
    const auto& tmpl = c["family"] == "qwen3" ? qwen3 : llama3;
    expect_case(c, [&] { return tmpl.render(c["messages"], c["tools"], c["add_generation_prompt"], c["extra"]); });
  }
}

}  // namespace
