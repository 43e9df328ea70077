// config.json -> the model description the components need (ckb/contracts/model_config.toml).
// Parses the covered dense families (Qwen3ForCausalLM, LlamaForCausalLM), also when the text model sits in a
// nested "text_config". Every error names the file and the field.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// The JSON object that describes the text model: the root, or root["text_config"] when present.
// `source` names the file in error messages.
const nlohmann::json& text_config_of(const nlohmann::json& root);

// Reads DIR/config.json (+ generation_config.json, tokenizer_config.json when present for EOS/BOS; tokenizer.json
// when present to resolve special-token texts, set tokenizer_vocab_size and check it fits vocab_size).
ModelConfig load_model_config(const std::filesystem::path& checkpoint_dir);

// Parses an already-read config.json object; `source` names the file in error messages.
ModelConfig parse_model_config(const nlohmann::json& root, const std::string& source);

}  // namespace mi::io
