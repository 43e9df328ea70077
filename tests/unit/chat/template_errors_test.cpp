// Rejections: unsupported or malformed templates fail when loaded, with a message naming the construct and its
// line:column; runaway templates (deep nesting, endless loops, output or memory blow-up, unbounded
// recursion) fail with an error instead of hanging or crashing; bad tokenizer_config.json fields are named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/error.h"

namespace {

using mi::chat::ChatTemplate;
using nlohmann::ordered_json;

// The message of the mi::Error that constructing (and, if that succeeds, rendering) `source` throws.
std::string error_of(const std::string& source, const mi::chat::RenderLimits& limits = {}) {
  try {
    ChatTemplate tmpl(source, ordered_json::object(), "test");
    tmpl.set_limits(limits);
    const std::string out = tmpl.render(ordered_json::array({{{"role", "user"}, {"content", "hi"}}}), nullptr, true,
                                        ordered_json::object());
    return "no error; rendered " + ordered_json(out).dump();
  } catch (const mi::Error& e) {
    return e.what();
  }
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ChatTemplateErrors, UnsupportedTagNamesTagAndPosition) {
  const std::string message = error_of("Hello\n  {% include 'other.jinja' %}");
  EXPECT_TRUE(contains(message, "chat template test: line 2:6: unsupported tag '{% include %}'")) << message;
  EXPECT_TRUE(contains(error_of("{% extends 'base' %}"), "line 1:4: unsupported tag '{% extends %}'"));
  EXPECT_TRUE(contains(error_of("{% raw %}x{% endraw %}"), "line 1:4: unsupported tag '{% raw %}'"));
  EXPECT_TRUE(contains(error_of("{% frobnicate %}"), "line 1:4: unknown tag '{% frobnicate %}'"));
}

TEST(ChatTemplateErrors, UnclosedBlockNamesOpeningTag) {
  const std::string message = error_of("a\n{% for m in messages %}\n{% if m %}x{% endif %}");
  EXPECT_TRUE(contains(message, "line 2:4: unclosed '{% for %}' block: expected '{% endfor %}' or '{% else %}'"))
      << message;
  EXPECT_TRUE(contains(error_of("{% if x %}{% else %}"), "line 1:4: unclosed '{% if %}' block")) << error_of("{% if x %}{% else %}");
  EXPECT_TRUE(contains(error_of("{% endif %}"), "line 1:4: unexpected '{% endif %}'"));
  EXPECT_TRUE(contains(error_of("{% for x in y %}{% endif %}"), "line 1:20: unexpected '{% endif %}'"));
}

TEST(ChatTemplateErrors, UnknownFilterAndTest) {
  const std::string message = error_of("{{ messages | frobnicate }}");
  EXPECT_TRUE(contains(message, "line 1:15: unknown filter 'frobnicate'")) << message;
  // Unknown even where the expression never runs (Jinja2 rejects it when compiling, too).
  EXPECT_TRUE(contains(error_of("{% if false %}{{ x|nope }}{% endif %}"), "line 1:20: unknown filter 'nope'"));
  EXPECT_TRUE(contains(error_of("{{ x is frob }}"), "line 1:9: unknown test 'frob'"));
}

TEST(ChatTemplateErrors, LexicalErrors) {
  EXPECT_TRUE(contains(error_of("ab {{ 'x' "), "line 1:4: unclosed tag: missing '}}'"));
  EXPECT_TRUE(contains(error_of("{% if x "), "line 1:1: unclosed tag: missing '%}'"));
  EXPECT_TRUE(contains(error_of("x\n{# note"), "line 2:1: unclosed comment"));
  EXPECT_TRUE(contains(error_of("{{ 'abc }}"), "line 1:4: unterminated string literal"));
  EXPECT_TRUE(contains(error_of("{{ a ] }}"), "line 1:6: unexpected ']'"));
  EXPECT_TRUE(contains(error_of("{{ a $ b }}"), "line 1:6: unexpected character '$'"));
  EXPECT_TRUE(contains(error_of("{{ 99999999999999999999 }}"), "line 1:4: integer literal"));
  EXPECT_TRUE(contains(error_of("{% break %}"), "line 1:4: '{% break %}' outside of a for loop"));
  EXPECT_TRUE(contains(error_of("{{ f(*args) }}"), "unsupported: *args"));
  EXPECT_TRUE(contains(error_of("{% for x in y recursive %}{% endfor %}"), "unsupported: recursive for loops"));
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheExpression) {
  const std::string message = error_of("line one\n\n   {{ 'a' + messages[0].content + 1 }}");
  EXPECT_TRUE(contains(message, "line 3:33: TypeError: can only concatenate str (not \"int\") to str")) << message;
  const std::string raised = error_of("{% if true %}\n{{ raise_exception('Roles must alternate user/assistant') }}{% endif %}");
  EXPECT_TRUE(contains(raised, "line 2:4: TemplateError: Roles must alternate user/assistant")) << raised;
  EXPECT_TRUE(contains(error_of("{{ messages[0].nope.x }}"), "UndefinedError: 'dict object' has no attribute 'nope'"));
}

TEST(ChatTemplateErrors, RunawayTemplatesStop) {
  mi::chat::RenderLimits small;
  small.max_steps = 100'000;
  EXPECT_TRUE(contains(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small),
                       "evaluation steps"));
  EXPECT_TRUE(contains(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "RecursionError"));
  mi::chat::RenderLimits small_values;  // the same checks as the 64 MiB / 4M-item defaults, faster
  small_values.values.max_string_bytes = 1 << 20;
  small_values.values.max_list_items = 10'000;
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                                small_values),
                       "MemoryError: string of"));
  EXPECT_TRUE(contains(error_of("{{ 'x' * 1000000000000 }}"), "MemoryError"));
  EXPECT_TRUE(contains(error_of("{{ range(10000000000)|length }}"), "OverflowError: Range too big"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                                small_values),
                       "MemoryError: list of"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                                small_values),
                       "MemoryError: string of"));
  EXPECT_TRUE(contains(error_of("{{ 2 ** 64 }}"), "OverflowError"));
  mi::chat::RenderLimits tiny_output;
  tiny_output.max_output_bytes = 1000;
  EXPECT_TRUE(contains(error_of("{% for i in range(1000) %}0123456789{% endfor %}", tiny_output), "rendered output exceeds"));
  // Deep nesting is refused by the parser instead of recursing off the stack.
  EXPECT_TRUE(contains(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), "nested too deeply"));
  EXPECT_TRUE(contains(error_of("{{ " + std::string(5000, '-') + "1 }}"), "nested too deeply"));
  std::string chain = "{{ messages";
  for (int i = 0; i < 5000; ++i) chain += ".a";
  EXPECT_TRUE(contains(error_of(chain + " }}"), "expression nested too deeply"));
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_TRUE(contains(error_of(sum + " }}"), "expression nested too deeply"));
  std::string blocks;
  for (int i = 0; i < 500; ++i) blocks += "{% if true %}";
  EXPECT_TRUE(contains(error_of(blocks), "nested too deeply"));
  // A namespace stored inside itself would be a reference cycle.
  EXPECT_TRUE(contains(error_of("{% set ns = namespace() %}{% set ns.self = [ns] %}"), "namespace inside a namespace"));
}

TEST(ChatTemplateErrors, InvalidUtf8TemplateIsRejected) {
  EXPECT_TRUE(contains(error_of("abc \xff\xfe {{ x }}"), "not valid UTF-8"));
}

// ---- tokenizer_config.json handling -----------------------------------------------------------------------

TEST(ChatTemplateConfig, NamedTemplateListUsesDefault) {
  const ordered_json config = {
      {"chat_template", ordered_json::array({{{"name", "tool_use"}, {"template", "TOOLS"}},
                                             {{"name", "default"}, {"template", "{{ bos_token }}D{{ eos_token }}"}}})},
      {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
      {"eos_token", "</s>"},
      {"unk_token", nullptr}};
  const auto tmpl = ChatTemplate::from_config(config, "cfg");
  EXPECT_EQ(tmpl.render(ordered_json::array(), nullptr, false, nullptr), "<s>D</s>");
  // A null special token stays undefined (HF leaves it out of special_tokens_map): renders empty, not "None".
  const auto unk = ChatTemplate::from_config({{"chat_template", "[{{ unk_token }}]{{ unk_token is defined }}"}, {"unk_token", nullptr}}, "cfg");
  EXPECT_EQ(unk.render(ordered_json::array(), nullptr, false, nullptr), "[]False");
}

TEST(ChatTemplateConfig, BadConfigFieldsAreNamed) {
  try {
    ChatTemplate::from_config({{"bos_token", "<s>"}}, "cfg.json");
    ADD_FAILURE() << "no chat_template accepted";
  } catch (const mi::Error& e) {
    EXPECT_TRUE(contains(e.what(), "cfg.json: field 'chat_template' is missing")) << e.what();
  }
  try {
    ChatTemplate::from_config({{"chat_template", ordered_json::array({{{"name", "rag"}, {"template", "x"}}})}}, "cfg.json");
    ADD_FAILURE() << "template list without default accepted";
  } catch (const mi::Error& e) {
    EXPECT_TRUE(contains(e.what(), "without a \"default\" entry")) << e.what();
  }
  try {
    ChatTemplate::from_config({{"chat_template", "x"}, {"eos_token", 5}}, "cfg.json");
    ADD_FAILURE() << "numeric eos_token accepted";
  } catch (const mi::Error& e) {
    EXPECT_TRUE(contains(e.what(), "cfg.json: field 'eos_token'")) << e.what();
  }
  try {
    ChatTemplate::load("/nonexistent/tokenizer/dir");
    ADD_FAILURE() << "missing directory accepted";
  } catch (const mi::Error& e) {
    EXPECT_TRUE(contains(e.what(), "tokenizer_config.json: cannot open file")) << e.what();
  }
}

TEST(ChatTemplateConfig, RenderInputsAreChecked) {
  const ChatTemplate tmpl("{{ messages|length }}", ordered_json::object(), "t");
  EXPECT_THROW(tmpl.render(ordered_json::object(), nullptr, false, nullptr), mi::Error);
  EXPECT_THROW(tmpl.render(ordered_json::array(), ordered_json::object(), false, nullptr), mi::Error);
  EXPECT_THROW(tmpl.render(ordered_json::array(), nullptr, false, ordered_json::array()), mi::Error);
  EXPECT_EQ(tmpl.render(ordered_json::array({1, 2}), nullptr, false, nullptr), "2");
  // Key order of inputs is kept (Python dicts keep insertion order; tojson shows it).
  const ChatTemplate json_tmpl("{{ messages[0]|tojson }}", ordered_json::object(), "t");
  EXPECT_EQ(json_tmpl.render(ordered_json::parse(R"([{"z": 1, "a": "é"}])"), nullptr, false, nullptr),
            "{\"z\": 1, \"a\": \"é\"}");
}

}  // namespace
