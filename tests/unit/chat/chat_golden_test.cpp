// The golden chat-template cases (tests/data/tokenizers/<family>.chat.jsonl, rendered by Jinja2 3.1 as
// Hugging Face configures it) must be reproduced byte for byte from the real tokenizer_config.json files.
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

std::vector<ordered_json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<ordered_json> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) cases.push_back(ordered_json::parse(line));
  }
  return cases;
}

std::filesystem::path tokenizer_dir(const std::string& family) {
  return std::filesystem::path(METAINFER_TOKENIZERS) / family;
}

void check_family(const std::string& family) {
  const auto dir = tokenizer_dir(family);
  ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json"))
      << dir << "/tokenizer_config.json is missing: run setup.sh (it fetches the tokenizers into .cache/tokenizers)";
  const auto tmpl = mi::chat::ChatTemplate::load(dir);
  const auto cases = read_jsonl(std::filesystem::path(METAINFER_TEST_DATA) / "tokenizers" / (family + ".chat.jsonl"));
  ASSERT_FALSE(cases.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const ordered_json& c = cases[i];
    ordered_json extra = ordered_json::object();
    if (c.contains("enable_thinking")) extra["enable_thinking"] = c["enable_thinking"];
    const ordered_json tools = c.contains("tools") ? c["tools"] : ordered_json();
    SCOPED_TRACE(family + " case " + std::to_string(i) + ": " + c["messages"].dump());
    if (c.contains("error")) {
      try {
        tmpl.render(c["messages"], tools, c.value("add_generation_prompt", false), extra);
        ADD_FAILURE() << "expected the template to reject this case with: " << c["error"];
      } catch (const mi::Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
      }
      continue;
    }
    const std::string rendered = tmpl.render(c["messages"], tools, c.value("add_generation_prompt", false), extra);
    EXPECT_EQ(rendered, c["rendered"].get<std::string>());
  }
}

TEST(ChatTemplateGolden, Qwen3) { check_family("qwen3"); }
TEST(ChatTemplateGolden, Llama3) { check_family("llama3"); }

}  // namespace
