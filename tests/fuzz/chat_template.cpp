// libFuzzer target: a chat template (the fuzz input, as template source) is parsed and rendered with a fixed
// conversation (system/user/assistant turns, reasoning, tool calls with dict and string arguments, tool
// results, tools). Any input must end in a rendered string or an mi::Error: no crash, hang, leak, runaway
// memory or out-of-bounds access (run under ASan/UBSan). Render limits are lowered so slow inputs fail fast.
//
// Build: the CMake scaffolding (-DMETAINFER_FUZZ=ON, target fuzz_chat_template) instruments only this file; for
// coverage feedback inside the interpreter, build with the chat sources instrumented too, e.g.
//   F="-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -Icomponents"
//   for f in components/chat/*.cpp; do clang++ $F -c $f -o $(basename $f .cpp).o; done
//   clang++ $F -fsanitize=fuzzer tests/fuzz/chat_template.cpp *.o -lutf8proc -o fuzz_chat_template
// Run: fuzz_chat_template -max_total_time=600 -max_len=8192 -timeout=10 CORPUS_DIR
//
// Corpus: tests/data/fuzz/chat_template/ (seeded with the real Qwen3 / Llama 3 templates and the snippets of
// tests/unit/chat/jinja_cases.jsonl, minimized), replayed by test_chat (fuzz_corpus_test.cpp includes this
// file and calls LLVMFuzzerTestOneInput on every corpus file).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/error.h"

namespace {

const nlohmann::ordered_json& fuzz_messages() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? \u00e9\u4f60"},
    {"role": "assistant", "content": "<think>\nneed tool\n</think>\n\nChecking.", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 1.5}}},
      {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
    {"role": "tool", "content": "{\"temp_c\": 12}"},
    {"role": "assistant", "content": "12C.", "reasoning_content": "easy"},
    {"role": "user", "content": [{"type": "text", "text": "parts"}]},
    {"role": "user", "content": null}
  ])");
  return messages;
}

const nlohmann::ordered_json& fuzz_tools() {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
  ])");
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // templates are small; long inputs only slow the search down
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    mi::chat::ChatTemplate tmpl(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}}, "fuzz");
    mi::chat::RenderLimits limits;
    limits.max_steps = 50'000;
    limits.max_output_bytes = 1 << 20;
    limits.values.max_string_bytes = 1 << 20;
    limits.values.max_list_items = 10'000;
    tmpl.set_limits(limits);
    try {
      (void)tmpl.render(fuzz_messages(), fuzz_tools(), true, {{"enable_thinking", false}});
    } catch (const mi::Error&) {
    }
    (void)tmpl.render(nlohmann::ordered_json::array(), nullptr, false, nlohmann::ordered_json::object());
  } catch (const mi::Error&) {
    // rejected template or failed render: fine
  }
  return 0;
}
