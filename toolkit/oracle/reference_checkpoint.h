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

// The token mixer of a layer, from config "layer_types": "full_attention" or "linear_attention" (Gated DeltaNet,
// the qwen3_5 / qwen3_next hybrids). Dense families have only full attention.
enum class LayerKind { FullAttention, LinearAttention };

// The MLP of a layer: dense SwiGLU, or (qwen3_next) a sparse mixture of SwiGLU experts plus a gated shared expert.
enum class MlpKind { Dense, SparseMoe };

// Gated DeltaNet dimensions (config "linear_*"; Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025).
struct LinearAttentionConfig {
  int num_key_heads = 0;    // linear_num_key_heads (nk)
  int key_head_dim = 0;     // linear_key_head_dim (dk)
  int num_value_heads = 0;  // linear_num_value_heads (nv, a multiple of nk)
  int value_head_dim = 0;   // linear_value_head_dim (dv)
  int conv_kernel = 0;      // linear_conv_kernel_dim (K)
};

// Sparse MoE dimensions (qwen3_next).
struct MoeConfig {
  int num_experts = 0;                      // num_experts
  int experts_per_token = 0;                // num_experts_per_tok
  int expert_intermediate_size = 0;         // moe_intermediate_size
  int shared_expert_intermediate_size = 0;  // shared_expert_intermediate_size
  bool norm_topk_prob = true;               // renormalise the chosen experts' probabilities to sum 1
};

// What the forward pass needs from config.json, validated. Values HF would default are defaulted as HF does.
struct ReferenceConfig {
  std::string architecture;   // "Qwen3ForCausalLM" | "LlamaForCausalLM" | "Qwen3_5ForCausalLM" |
                              // "Qwen3_5ForConditionalGeneration" | "Qwen3NextForCausalLM"
  std::string model_type;     // "qwen3" | "llama" | "qwen3_5_text" | "qwen3_next"
  std::string config_source;  // "config.json" or "config.json: text_config"
  std::string weight_prefix = "model.";  // the decoder's tensors: "model." or "model.language_model." (Qwen3_5 VL)
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;  // head_dim * partial_rotary_factor: the leading dims of each head that are rotated
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qk_norm = false;  // Qwen3 and the hybrids: per-head RMSNorm on q and k before rotary
  bool tie_word_embeddings = false;
  // Hybrids (qwen3_5, qwen3_next): input/post/final norms and q/k norms multiply by (1 + w), the weights being stored
  // zero-centred; the DeltaNet output norm multiplies by w.
  bool norm_one_plus_weight = false;
  bool attn_output_gate = false;   // hybrids: q_proj also yields a per-head gate, output *= sigmoid(gate)
  bool grouped_linear_proj = false;  // qwen3_next: in_proj_qkvz / in_proj_ba grouped per key head
  std::vector<LayerKind> layer_kinds;  // one per layer
  std::vector<MlpKind> mlp_kinds;      // one per layer
  LinearAttentionConfig linear;        // set when some layer is LinearAttention
  MoeConfig moe;                       // set when some layer is SparseMoe
};

// Reads and validates DIR/config.json (or config.json's text_config). OracleError on anything the oracle does not
// implement exactly (another architecture, hidden_act other than silu, biases, sliding window, MoE / partial rotary /
// M-RoPE / linear-attention layers outside the hybrid families, a layer type other than full_attention and
// linear_attention, an unknown rope scaling type) or a missing / mistyped field.
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
