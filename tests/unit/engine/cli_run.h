// Runs the engine command line in-process on the test model and captures its streams.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "engine/chat_commands.h"
#include "engine/cli.h"
#include "test_model.h"

namespace mi_test {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// An engine as the generator would describe it, sized for the golden checkpoints (vocab 512, prompts <= 150).
inline mi::engine::EngineInfo test_engine_info(int vocab_size = 512, int max_context = 256) {
  mi::engine::EngineInfo info;
  info.engine_name = "test-engine";
  info.architecture = "Qwen3ForCausalLM";
  info.family = "qwen3";
  info.kernel_level = "avx2";
  info.manifest_sha256 = std::string(64, 'a');
  info.metainfer_version = "0.0.0-test";
  info.threads = 1;
  info.max_batch = 1;
  info.max_context = max_context;
  info.kv_block_size = 16;
  info.chunked_prefill = 0;
  info.vocab_size = vocab_size;
  info.fast_numerics_default = false;
  return info;
}

// The command line of an engine generated with runtime.chat (Chat = ChatTemplateCommands) or without (NoChat).
template <class Chat = mi::engine::ChatTemplateCommands>
CliRun run_cli(const mi::engine::EngineInfo& info, const std::vector<std::string>& args, const std::string& input = "") {
  std::vector<const char*> argv{"test-engine"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::istringstream in(input);
  std::ostringstream out, err;
  CliRun r;
  r.code = mi::engine::run_engine_cli<TestModel, mi::engine::NoExtraCommands, Chat>(info, int(argv.size()), argv.data(), in, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace mi_test
