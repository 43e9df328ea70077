// The user's deployment constraints: a TOML file (every field documented in README.md "Constraints file"), with
// every field overridable on the command line. Unknown keys, wrong types and impossible values are errors naming the
// field (mi::Error -> exit 2). Checks that need the model (TP divides heads, context within the model's) happen in
// coverage (toolkit/coverage), which has read config.json.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace mi::constraints {

struct Targets {  // performance targets; 0 = no target
  double ttft_ms = 0;           // time to first token
  double tpot_ms = 0;           // time per output token
  double throughput_tok_s = 0;  // aggregate generated tokens per second
  double memory_mb = 0;         // peak resident memory
};

struct Constraints {
  std::filesystem::path model;      // HF checkpoint directory (absolute after resolution)
  std::string platform = "auto";    // "auto" or a ckb/platforms id
  std::string dtype = "auto";       // auto (= stored) | bf16 | f16 | f32 | int8 (quantised at load): the weight dtype the engine computes with
  int threads = 0;                  // 0 = every CPU this process may use
  int tensor_parallel = 1;
  std::string mode = "offline";     // offline | serve | bench
  std::string numerics = "precise"; // precise | fast (default numerical mode of the engine)
  // Element of the KV cache in fast numerics: f32, or bf16 (keys and values rounded once when stored: half the
  // memory and half the bytes decode attention reads; needs numerics = "fast"). Precise numerics always caches f32.
  std::string kv_dtype = "f32";
  int max_batch = 1;
  int max_context = 0;              // tokens per sequence (prompt + generated); 0 = min(4096, the model's maximum)
  int kv_block_size = 16;
  // KV-cache blocks in the pool, allocated once; 0 = max_batch x ceil(max_context / kv_block_size), so every
  // sequence can reach max_context at once. Fewer (at least one full context) lets requests wait for blocks.
  int kv_blocks = 0;
  bool prefix_cache = false;
  // The chat template interpreter (`chat`, `generate --chat`): not set = on for serve (POST /v1/chat/completions),
  // off otherwise. Use wants_chat().
  std::optional<bool> chat;
  int chunked_prefill = 0;          // 0 = whole prompt in one step; else tokens per prefill chunk
  Targets targets;
  // Kernel parameters fixed at build time ([tuning]: NAME = integer), each declared by the platform's [[tuning]]
  // entries in the CKB (coverage checks name and value); `metainfer generate --tune` measures and fills them.
  std::map<std::string, int> tuning;
  std::string source;               // where the constraints came from (file path or "command line")

  bool wants_chat() const { return chat.value_or(mode == "serve"); }

  nlohmann::json to_json() const;
};

// Command-line overrides: each set field replaces the file's value.
struct Overrides {
  std::optional<std::string> model, platform, dtype, mode, numerics, kv_dtype, prefix_cache, chat;
  std::optional<int> threads, tensor_parallel, max_batch, max_context, kv_block_size, kv_blocks, chunked_prefill;
  std::optional<double> ttft_ms, tpot_ms, throughput_tok_s, memory_mb;
  std::optional<std::map<std::string, int>> tuning;  // replaces the file's [tuning] table as a whole
};

// Adds --model, --platform, --dtype, --threads, --tp, --mode, --numerics, --kv-dtype, --max-batch, --max-context,
// --kv-block-size, --kv-blocks, --prefix-cache, --chat, --chunked-prefill, --ttft-ms, --tpot-ms, --throughput, --memory-mb to `cmd`.
void add_override_options(CLI::App* cmd, Overrides& overrides);

// Bytes per cached key or value element of an engine running its default numerics, from a plan's or manifest's
// "constraints" object: 2 when numerics = "fast" and kv_dtype = "bf16" (the bf16 KV cache), else 4 (kv_dtype absent:
// an engine generated before the option, f32).
int kv_element_bytes(const nlohmann::json& constraints);

// Parses a constraints file (TOML). Relative model paths are relative to the file's directory.
Constraints load_file(const std::filesystem::path& file);

// file (optional) + overrides -> validated constraints. Without a file, --model is required.
Constraints resolve(const std::optional<std::filesystem::path>& file, const Overrides& overrides);

// Range and enum checks that need nothing but the constraints themselves.
void validate(const Constraints& c);
// runtime.kv_blocks against a context of max_context tokens (0: not resolved yet, nothing to check): 0, or enough
// blocks for one sequence of the whole context (a request that fits max_context must fit the pool). mi::Error
// naming the field otherwise.
void check_kv_blocks(const Constraints& c, int max_context);

}  // namespace mi::constraints
