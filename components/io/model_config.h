// config.json -> the model description the components need (ckb/contracts/model_config.toml).
// Parses the covered dense families (Qwen3ForCausalLM, LlamaForCausalLM), also when the text model sits in a
// nested "text_config". Every error names the file and the field.
#pragma once
#include <filesystem>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Declarations only: the generated model.h includes this header, and its translation units need not parse the
// whole JSON library (the functions are defined in model_config.cpp).
#include <nlohmann/json_fwd.hpp>

namespace mi::io {

// Llama 3 "rope_type": "llama3" frequency scaling (Meta's Llama 3.1 reference: scale long wavelengths by 1/factor,
// keep short ones, interpolate smoothly between low_freq_factor and high_freq_factor).
struct RopeScaling {
  std::string rope_type;  // "llama3" is the only covered type
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;    // e.g. "qwen3", "llama"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // config "head_dim" when present, else hidden_size / num_attention_heads
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  std::string torch_dtype;  // "bfloat16", "float32", ... ("dtype" or "torch_dtype")
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;  // union of config.json, generation_config.json, tokenizer_config.json
  // Number of ids the tokenizer can produce (its largest id + 1) when DIR/tokenizer.json exists. May be smaller
  // than vocab_size (embeddings padded past the tokenizer's last id); load_model_config fails when larger.
  std::optional<int> tokenizer_vocab_size;
};

// Upper bounds on config.json values, checked before anything is sized by them: num_hidden_layers = 1e9 is bad input
// (exit 2 naming the field and the bound), not an allocation that eats the machine. Every released model is far
// inside them (the largest: ~128 layers, hidden 16384-18432, intermediate 53248-73728, vocab 256k-262k, 128 heads,
// head_dim 256, 10M positions).
struct ConfigBound {
  const char* field;
  int64_t max;
};
inline constexpr ConfigBound kConfigBounds[] = {
    {"vocab_size", int64_t(1) << 23},                       // 8,388,608
    {"hidden_size", int64_t(1) << 18},                      // 262,144
    {"intermediate_size", int64_t(1) << 18},                // 262,144
    {"moe_intermediate_size", int64_t(1) << 18},            // 262,144
    {"num_hidden_layers", 1024},
    {"num_attention_heads", 4096},
    {"num_key_value_heads", 4096},
    {"head_dim", 4096},
    {"max_position_embeddings", int64_t(1) << 24},          // 16,777,216
    {"original_max_position_embeddings", int64_t(1) << 24}, // in rope_scaling / rope_parameters
};
// num_attention_heads * head_dim (the q projection's rows) and num_key_value_heads * head_dim.
inline constexpr int64_t kMaxAttentionWidth = int64_t(1) << 20;

// The bound of a config field; nullopt when it has none.
std::optional<int64_t> config_bound(std::string_view field);

// Checks the bounded fields of a config object (and of its rope_scaling / rope_parameters / text_config objects):
// a number beyond its bound, or an attention width beyond kMaxAttentionWidth, is an mi::Error
// "<source>: field '<prefix><field>': <value> exceeds metainfer's bound of <max> ...". Values of the wrong type are
// left to the typed parse. Cheap: run it first, before any size is taken from the config.
void check_config_bounds(const nlohmann::json& config, const std::string& source, const std::string& prefix = "");

// `config` without the fields named in `ignored` (at any depth) and without null values: what an engine embeds as
// the config.json it was generated for (nlohmann::json objects are sorted, so the dump is deterministic).
nlohmann::json computation_relevant_config(const nlohmann::json& config, const std::vector<std::string>& ignored);

// A generated engine's guard against a checkpoint of another model: `checkpoint` (the checkpoint's config.json)
// must equal `expected` (computation_relevant_config of the one the engine was generated for) in every field not
// named in `ignored`; null and absent are the same. Throws mi::Error naming the first differing field in sorted
// order, with its dotted path:
//   "<source>: field 'hidden_act': this engine was generated for \"silu\", the checkpoint has \"gelu\""
void check_config_matches(const nlohmann::json& checkpoint, const nlohmann::json& expected,
                          const std::vector<std::string>& ignored, const std::string& source);

// check_config_matches as a generated engine calls it: the checkpoint's config.json at `config_path` against the
// texts the generator embedded (engine_config.h: the relevant config, the JSON list of ignored fields). Parsing here,
// not in the generated model.h, keeps the JSON parser out of the engine's model translation units.
void check_checkpoint_config(const std::filesystem::path& config_path, const char* expected_json,
                             const char* ignored_fields_json);

// The JSON object that describes the text model: the root, or root["text_config"] when present.
// `source` names the file in error messages.
const nlohmann::json& text_config_of(const nlohmann::json& root);

// Reads DIR/config.json (+ generation_config.json, tokenizer_config.json when present for EOS/BOS; tokenizer.json
// when present to resolve special-token texts, set tokenizer_vocab_size and check it fits vocab_size).
ModelConfig load_model_config(const std::filesystem::path& checkpoint_dir);

// Parses an already-read config.json object; `source` names the file in error messages.
ModelConfig parse_model_config(const nlohmann::json& root, const std::string& source);

}  // namespace mi::io
