// The acceptance oracle's own checkpoint loader: config.json and safetensors weights of a Hugging Face checkpoint,
// read independently of components/ (this file and its .cpp include only the standard library, POSIX mmap and
// nlohmann/json), so that the oracle shares no code with the engines it judges.
//
// What it reads (the Hugging Face layout, https://huggingface.co/docs/safetensors "Format"):
//   DIR/config.json                      the model config; when it has "text_config" the dimensions come from there
//   DIR/model.safetensors                one file, or
//   DIR/model.safetensors.index.json     {"weight_map": {tensor: shard file}} plus the shards it names
// A safetensors file is: 8-byte little-endian header length N, N bytes of JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data buffer.
// Tensors stay in their stored dtype (BF16, F16 or F32) in the mapped file and are converted to double on the fly.
//
// Every malformed input is an OracleError whose message names the file, the field or tensor, and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mi::oracle {

// The one error type of the oracle (the metainfer CLI maps it to exit status 2, bad input).
class OracleError : public std::runtime_error {
 public:
  explicit OracleError(const std::string& message) : std::runtime_error(message) {}
};

// Throws OracleError with the parts streamed together.
template <class... Parts>
[[noreturn]] void error(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw OracleError(out.str());
}

enum class StoredType { BF16, F16, F32 };
const char* stored_type_name(StoredType t);

// Element decoding, by hand (exact): bf16 is the top half of an f32; f16 is IEEE binary16.
double bf16_to_double(uint16_t bits);
double f16_to_double(uint16_t bits);

// A read-only view of one tensor inside a mapped file. Row-major.
struct TensorRef {
  std::string name;
  StoredType type = StoredType::F32;
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;  // unaligned is fine: elements are read with memcpy
  std::string file;                     // for messages

  int64_t numel() const;
  double at(int64_t i) const;  // element i (flat index) as double
  // Row r of a 2-D tensor (or the whole of a 1-D one when r == 0), converted into out[0 .. cols).
  void row_to_double(int64_t r, int64_t cols, double* out) const;
};

// The rotary scaling the oracle implements: none, or Llama 3's "llama3" (Meta's published rule).
struct RopeScaling {
  std::string type = "none";  // "none" | "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

// The layer kinds the oracle knows. Only full attention today; Gated DeltaNet ("linear_attention") layers of the
// qwen3_5 / qwen3_next hybrids would be added here with their own step function.
enum class LayerKind { FullAttention };

// What the forward pass needs from config.json, validated. Values HF would default are defaulted as HF does.
struct ReferenceConfig {
  std::string architecture;   // "Qwen3ForCausalLM" | "LlamaForCausalLM"
  std::string model_type;     // "qwen3" | "llama"
  std::string config_source;  // "config.json" or "config.json: text_config"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qk_norm = false;  // Qwen3: per-head RMSNorm on q and k before rotary
  bool tie_word_embeddings = false;
  std::vector<LayerKind> layer_kinds;  // one per layer
};

// Reads and validates DIR/config.json (or config.json's text_config). OracleError on anything the oracle does not
// implement exactly (another architecture, hidden_act other than silu, biases, sliding window, MoE, partial rotary,
// an unknown rope scaling type) or a missing / mistyped field.
ReferenceConfig read_reference_config(const std::filesystem::path& checkpoint_dir);

// The rotary inverse frequencies inv_freq[i] = theta^(-2i/d), i < d/2, with Llama 3 scaling applied when set,
// rounded to float32 as Hugging Face's rotary table is (its inv_freq buffer is float32; see reference_forward.cpp).
std::vector<double> rope_inv_freq(int rotary_dim, double theta, const RopeScaling& scaling);

// All safetensors files of a checkpoint, mapped read-only. Move-only.
class CheckpointWeights {
 public:
  static CheckpointWeights open(const std::filesystem::path& checkpoint_dir);
  CheckpointWeights(CheckpointWeights&&) noexcept;
  CheckpointWeights& operator=(CheckpointWeights&&) noexcept;
  ~CheckpointWeights();

  bool has(const std::string& name) const;
  // The tensor `name`, checked to have exactly `shape`; OracleError naming the tensor (and what is wrong) otherwise.
  const TensorRef& get(const std::string& name, const std::vector<int64_t>& shape) const;
  std::size_t count() const;

 private:
  CheckpointWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mi::oracle
