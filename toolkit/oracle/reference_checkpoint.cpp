// The oracle's checkpoint loader (see reference_checkpoint.h). Written from the safetensors format description and
// Hugging Face's config semantics; deliberately independent of components/io.
#include "oracle/reference_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mi::oracle {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- config.json ---------------------------------------------------------------------------------------------

// Reads typed fields of one JSON object, naming `where` ("DIR/config.json" or "DIR/config.json: text_config") in
// every error.
struct ConfigReader {
  const json& obj;
  std::string where;

  bool present(const char* key) const { return obj.contains(key) && !obj.at(key).is_null(); }

  int positive_int(const char* key) const {
    if (!present(key)) error(where, ": field '", key, "' is missing (expected a positive integer)");
    const json& v = obj.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > std::numeric_limits<int>::max())
      error(where, ": field '", key, "': expected a positive integer, got ", v.dump());
    return static_cast<int>(v.get<int64_t>());
  }
  int positive_int_or(const char* key, int fallback) const { return present(key) ? positive_int(key) : fallback; }

  double positive_number_or(const char* key, double fallback) const {
    if (!present(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      error(where, ": field '", key, "': expected a positive number, got ", v.dump());
    return v.get<double>();
  }

  bool bool_or(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_boolean()) error(where, ": field '", key, "': expected true or false, got ", v.dump());
    return v.get<bool>();
  }

  std::string string_or(const char* key, const std::string& fallback) const {
    if (!present(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_string()) error(where, ": field '", key, "': expected a string, got ", v.dump());
    return v.get<std::string>();
  }
};

// rope_scaling (transformers 4.x) or rope_parameters (5.x): {"rope_type" | "type": ..., factor, ...}.
RopeScaling read_rope_scaling(const json& block, const std::string& where) {
  RopeScaling s;
  if (block.is_null()) return s;
  if (!block.is_object()) error(where, ": expected an object or null, got ", block.dump());
  ConfigReader r{block, where};
  const std::string type = r.present("rope_type") ? r.string_or("rope_type", "") : r.string_or("type", "default");
  if (type == "default" || type == "none") return s;
  if (type != "llama3")
    error(where, ": rope type '", type, "' is not implemented by the oracle (it implements the default rotary and "
          "\"llama3\")");
  s.type = "llama3";
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    if (!r.present(key)) error(where, ": rope type \"llama3\" needs field '", key, "'");
  s.factor = r.positive_number_or("factor", 1.0);
  s.low_freq_factor = r.positive_number_or("low_freq_factor", 1.0);
  s.high_freq_factor = r.positive_number_or("high_freq_factor", 4.0);
  s.original_max_position_embeddings = r.positive_number_or("original_max_position_embeddings", 8192.0);
  if (!(s.high_freq_factor > s.low_freq_factor))
    error(where, ": field 'high_freq_factor' (", s.high_freq_factor, ") must be greater than 'low_freq_factor' (",
          s.low_freq_factor, ")");
  return s;
}

json read_json_file(const fs::path& file, const char* what) {
  std::ifstream in(file, std::ios::binary);
  if (!in) error(file.string(), ": cannot open ", what);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    error(file.string(), ": not valid JSON (", e.what(), ")");
  }
}

// ---- safetensors -----------------------------------------------------------------------------------------------

// One read-only mapping of a whole file.
struct MappedFile {
  std::string path;
  const unsigned char* data = nullptr;
  std::size_t size = 0;

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data) ::munmap(const_cast<unsigned char*>(data), size);
  }

  explicit MappedFile(const fs::path& file) : path(file.string()) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) error(path, ": cannot open weights file (", std::strerror(errno), ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      error(path, ": cannot stat weights file");
    }
    size = static_cast<std::size_t>(st.st_size);
    if (size < 8) {
      ::close(fd);
      error(path, ": truncated safetensors file (", size, " bytes; a file starts with an 8-byte header length)");
    }
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) error(path, ": cannot map weights file (", std::strerror(errno), ")");
    data = static_cast<const unsigned char*>(p);
  }
};

struct ParsedTensor {
  TensorRef ref;
  std::string unsupported_dtype;  // non-empty: a dtype the oracle cannot read (an error only when it is used)
};

std::size_t element_size(StoredType t) { return t == StoredType::F32 ? 4 : 2; }

// Parses and checks the header of one mapped safetensors file.
std::vector<ParsedTensor> parse_safetensors(const MappedFile& f) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f.data[i];  // little-endian
  if (n > f.size - 8)
    error(f.path, ": truncated safetensors file: the header length says ", n, " bytes but only ", f.size - 8,
          " follow");
  json header;
  try {
    header = json::parse(f.data + 8, f.data + 8 + n);
  } catch (const json::exception& e) {
    error(f.path, ": the safetensors header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object()) error(f.path, ": the safetensors header is not a JSON object");
  const unsigned char* buffer = f.data + 8 + n;
  const uint64_t buffer_size = f.size - 8 - n;

  std::vector<ParsedTensor> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = f.path + ": tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      error(where, ": expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
    const json& dtype = entry.at("dtype");
    const json& shape = entry.at("shape");
    const json& offsets = entry.at("data_offsets");
    if (!dtype.is_string()) error(where, ": \"dtype\" is not a string");
    if (!shape.is_array()) error(where, ": \"shape\" is not an array");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      error(where, ": \"data_offsets\" must be [begin, end] with non-negative integers");

    ParsedTensor t;
    t.ref.name = name;
    t.ref.file = f.path;
    const std::string type = dtype.get<std::string>();
    std::size_t elem = 0;
    if (type == "BF16") t.ref.type = StoredType::BF16;
    else if (type == "F16") t.ref.type = StoredType::F16;
    else if (type == "F32") t.ref.type = StoredType::F32;
    else t.unsupported_dtype = type;
    if (t.unsupported_dtype.empty()) elem = element_size(t.ref.type);

    uint64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned()) error(where, ": \"shape\" entries must be non-negative integers, got ", d.dump());
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / dim)
        error(where, ": shape ", shape.dump(), " is too large");
      numel *= dim;
      t.ref.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > buffer_size)
      error(where, ": data_offsets [", begin, ", ", end, "] lie outside the ", buffer_size,
            "-byte data buffer (truncated file?)");
    if (elem != 0 && end - begin != numel * elem)
      error(where, ": data_offsets span ", end - begin, " bytes but shape ", shape_text(t.ref.shape), " of ", type,
            " needs ", numel * elem);
    t.ref.data = buffer + begin;
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace

// ---- element decoding -------------------------------------------------------------------------------------------

const char* stored_type_name(StoredType t) {
  switch (t) {
    case StoredType::BF16: return "BF16";
    case StoredType::F16: return "F16";
    case StoredType::F32: return "F32";
  }
  return "?";
}

double bf16_to_double(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;  // bf16 is the high half of an IEEE f32
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double f16_to_double(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // zero / subnormal: m * 2^-24
  if (exponent == 31)
    return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + mantissa, exponent - 25);  // (1 + m/1024) * 2^(e-15)
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

double TensorRef::at(int64_t i) const {
  switch (type) {
    case StoredType::BF16: {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      return bf16_to_double(b);
    }
    case StoredType::F16: {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      return f16_to_double(b);
    }
    case StoredType::F32: {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      return f;
    }
  }
  return 0;
}

void TensorRef::row_to_double(int64_t r, int64_t cols, double* out) const {
  const int64_t base = r * cols;
  switch (type) {
    case StoredType::BF16:
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t b;
        std::memcpy(&b, data + 2 * (base + c), 2);
        const uint32_t u = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        out[c] = f;
      }
      return;
    case StoredType::F16:
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t b;
        std::memcpy(&b, data + 2 * (base + c), 2);
        out[c] = f16_to_double(b);
      }
      return;
    case StoredType::F32:
      for (int64_t c = 0; c < cols; ++c) {
        float f;
        std::memcpy(&f, data + 4 * (base + c), 4);
        out[c] = f;
      }
      return;
  }
}

// ---- config ---------------------------------------------------------------------------------------------------

ReferenceConfig read_reference_config(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  if (!fs::is_directory(dir)) error(dir.string(), ": not a checkpoint directory");
  if (!fs::exists(file)) error(dir.string(), ": no config.json (expected a Hugging Face checkpoint directory)");
  const json root = read_json_file(file, "config.json");
  if (!root.is_object()) error(file.string(), ": expected a JSON object");

  ReferenceConfig c;
  const bool nested = root.contains("text_config") && !root.at("text_config").is_null();
  if (nested && !root.at("text_config").is_object())
    error(file.string(), ": field 'text_config': expected an object");
  const json& cfg = nested ? root.at("text_config") : root;
  c.config_source = nested ? "config.json: text_config" : "config.json";
  const ConfigReader r{cfg, file.string() + (nested ? ": text_config" : "")};
  const std::string root_where = file.string();

  // Architecture: the top-level "architectures" (the class that loads the whole checkpoint).
  const json* archs = root.contains("architectures") ? &root.at("architectures")
                      : (nested && cfg.contains("architectures")) ? &cfg.at("architectures") : nullptr;
  if (!archs || archs->is_null()) error(root_where, ": field 'architectures' is missing");
  if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    error(root_where, ": field 'architectures': expected a non-empty list of class names, got ", archs->dump());
  c.architecture = (*archs)[0].get<std::string>();
  static const char* const kArchitectures[] = {"Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen3_5ForCausalLM",
                                               "Qwen3_5ForConditionalGeneration", "Qwen3NextForCausalLM"};
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), c.architecture) == std::end(kArchitectures))
    error(root_where, ": field 'architectures': '", c.architecture,
          "' is not implemented by the oracle (it implements Qwen3ForCausalLM, LlamaForCausalLM, Qwen3_5ForCausalLM, "
          "Qwen3_5ForConditionalGeneration (text only) and Qwen3NextForCausalLM)");
  const bool qwen3_5 = c.architecture.starts_with("Qwen3_5");
  const bool qwen3_next = c.architecture == "Qwen3NextForCausalLM";
  const bool hybrid = qwen3_5 || qwen3_next;
  c.qk_norm = c.architecture == "Qwen3ForCausalLM" || hybrid;
  c.norm_one_plus_weight = hybrid;
  c.attn_output_gate = hybrid;
  c.grouped_linear_proj = qwen3_next;
  // Qwen3_5ForConditionalGeneration (the vision-language class) keeps its decoder under model.language_model.*; the
  // oracle runs the text decoder only (token ids in, no image inputs) and ignores the vision tower's tensors.
  c.weight_prefix = c.architecture == "Qwen3_5ForConditionalGeneration" ? "model.language_model." : "model.";
  c.model_type = r.string_or("model_type", qwen3_5 ? "qwen3_5_text" : qwen3_next ? "qwen3_next" : c.qk_norm ? "qwen3" : "llama");

  if (root.contains("quantization_config") || cfg.contains("quantization_config"))
    error(root_where, ": field 'quantization_config': quantized checkpoints are not implemented by the oracle");

  // Dimensions.
  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("hidden_size");
  c.intermediate_size = r.positive_int("intermediate_size");
  c.num_layers = r.positive_int("num_hidden_layers");
  c.num_heads = r.positive_int("num_attention_heads");
  c.num_kv_heads = r.positive_int_or("num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    error(r.where, ": field 'num_key_value_heads' (", c.num_kv_heads, ") must divide 'num_attention_heads' (",
          c.num_heads, ")");
  if (r.present("head_dim")) {
    c.head_dim = r.positive_int("head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      error(r.where, ": no 'head_dim' and 'hidden_size' (", c.hidden_size, ") is not a multiple of ",
            "'num_attention_heads' (", c.num_heads, ")");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) error(r.where, ": field 'head_dim' (", c.head_dim, ") must be even for rotary");
  c.rms_norm_eps = r.positive_number_or("rms_norm_eps", 1e-6);
  // HF's Qwen3Config and LlamaConfig default to untied; a composite config may say it at the top level.
  bool top_level_tie = false;
  if (nested) top_level_tie = ConfigReader{root, root_where}.bool_or("tie_word_embeddings", false);
  c.tie_word_embeddings = r.bool_or("tie_word_embeddings", top_level_tie);

  // Rotary: rope_theta and rope_scaling (4.x) or rope_parameters (5.x).
  c.rope_theta = r.positive_number_or("rope_theta", 10000.0);
  const json* mrope_section = nullptr;
  std::string mrope_where;
  double partial_rotary = 1.0;
  bool partial_rotary_given = false;
  auto read_partial = [&](const json& v, const std::string& where) {
    if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1)
      error(where, ": expected a number in (0, 1], got ", v.dump());
    partial_rotary = v.get<double>();
    partial_rotary_given = true;
  };
  if (r.present("partial_rotary_factor")) read_partial(cfg.at("partial_rotary_factor"), r.where + ": field 'partial_rotary_factor'");
  if (r.present("rope_parameters")) {
    const std::string where = r.where + ": field 'rope_parameters'";
    const json& p = cfg.at("rope_parameters");
    if (p.is_object() && p.contains("mrope_section") && !p.at("mrope_section").is_null()) {
      if (!qwen3_5) error(where, ": M-RoPE ('mrope_section') is not implemented by the oracle for ", c.architecture);
      mrope_section = &p.at("mrope_section");
      mrope_where = where + ".mrope_section";
    }
    c.rope_scaling = read_rope_scaling(p, where);
    if (p.is_object()) c.rope_theta = ConfigReader{p, where}.positive_number_or("rope_theta", c.rope_theta);
    // transformers 5 keeps partial_rotary_factor inside rope_parameters (Qwen3.5 has it in both places).
    if (p.is_object() && p.contains("partial_rotary_factor") && !p.at("partial_rotary_factor").is_null()) {
      const double top = partial_rotary;
      const bool top_given = partial_rotary_given;
      read_partial(p.at("partial_rotary_factor"), where + ".partial_rotary_factor");
      if (top_given && top != partial_rotary)
        error(where, ".partial_rotary_factor: ", partial_rotary, " disagrees with the top-level partial_rotary_factor ",
              top);
    }
  } else if (cfg.contains("rope_scaling")) {
    c.rope_scaling = read_rope_scaling(cfg.at("rope_scaling"), r.where + ": field 'rope_scaling'");
  }
  if (!hybrid && partial_rotary != 1.0)
    error(r.where, ": field 'partial_rotary_factor': ", partial_rotary,
          " is not implemented by the oracle for ", c.architecture, " (only full rotary, 1.0)");
  if (hybrid && !partial_rotary_given)
    error(r.where, ": field 'partial_rotary_factor' is missing (", c.architecture,
          " rotates only part of each head; the oracle does not assume a default)");
  // HF: rotary dim = int(head_dim * partial_rotary_factor); rotate-half within those dims, the rest pass through.
  c.rotary_dim = static_cast<int>(c.head_dim * partial_rotary);
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
    error(r.where, ": field 'partial_rotary_factor' (", partial_rotary, ") gives rotary dim ", c.rotary_dim,
          " of head_dim ", c.head_dim, "; it must be even and at least 2");
  if (mrope_section) {
    // Interleaved or sectioned M-RoPE: every rotary frequency takes one of the (temporal, height, width) position
    // components. For token ids alone (no image/video inputs) all three are the token position, so it is the plain
    // rotary; the sections must still cover exactly rotary_dim / 2 frequencies.
    if (!mrope_section->is_array()) error(mrope_where, ": expected a list of integers, got ", mrope_section->dump());
    int64_t sum = 0;
    for (const json& v : *mrope_section) {
      if (!v.is_number_unsigned()) error(mrope_where, ": expected non-negative integers, got ", mrope_section->dump());
      sum += v.get<int64_t>();
    }
    if (sum != c.rotary_dim / 2)
      error(mrope_where, ": sections ", mrope_section->dump(), " sum to ", sum, ", expected rotary_dim / 2 = ",
            c.rotary_dim / 2);
  }

  // Everything the oracle does not compute is refused rather than ignored.
  const std::string act =
      r.present("hidden_act") ? r.string_or("hidden_act", "silu") : r.string_or("hidden_activation", "silu");
  if (act != "silu")
    error(r.where, ": field 'hidden_act': '", act, "' is not implemented by the oracle (only \"silu\")");
  if (r.bool_or("attention_bias", false))
    error(r.where, ": field 'attention_bias': true is not implemented by the oracle (no projection biases)");
  if (r.bool_or("mlp_bias", false))
    error(r.where, ": field 'mlp_bias': true is not implemented by the oracle (no projection biases)");
  if (r.bool_or("use_sliding_window", false))
    error(r.where, ": field 'use_sliding_window': true is not implemented by the oracle (full causal attention only)");
  if (hybrid && !r.bool_or("attn_output_gate", true))
    error(r.where, ": field 'attn_output_gate': false is not implemented by the oracle (", c.architecture,
          " full-attention layers are output-gated)");

  // Layer pattern.
  c.layer_kinds.assign(c.num_layers, LayerKind::FullAttention);
  // Without layer_types, transformers' Qwen3Next / Qwen3.5 configs build it from full_attention_interval: layer i is
  // full attention when (i + 1) % interval == 0, linear attention otherwise.
  if (hybrid && !r.present("layer_types") && r.present("full_attention_interval")) {
    const int interval = r.positive_int("full_attention_interval");
    for (int i = 0; i < c.num_layers; ++i)
      if ((i + 1) % interval != 0) c.layer_kinds[size_t(i)] = LayerKind::LinearAttention;
  } else if (hybrid && !r.present("layer_types")) {
    error(r.where, ": field 'layer_types' is missing (", c.architecture,
          " needs the per-layer pattern of \"linear_attention\" and \"full_attention\", or full_attention_interval)");
  }
  if (r.present("layer_types")) {
    const json& types = cfg.at("layer_types");
    if (!types.is_array() || types.size() != static_cast<size_t>(c.num_layers))
      error(r.where, ": field 'layer_types': expected a list of ", c.num_layers, " layer types");
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
      if (t == "full_attention") continue;
      if (hybrid && t == "linear_attention") {
        c.layer_kinds[i] = LayerKind::LinearAttention;
        continue;
      }
      error(r.where, ": field 'layer_types[", i, "]': ", types[i].dump(), " is not implemented by the oracle",
            hybrid ? " (only \"full_attention\" and \"linear_attention\")" : " (only \"full_attention\")");
    }
  }
  if (std::count(c.layer_kinds.begin(), c.layer_kinds.end(), LayerKind::LinearAttention) > 0) {
    LinearAttentionConfig& la = c.linear;
    la.num_key_heads = r.positive_int("linear_num_key_heads");
    la.key_head_dim = r.positive_int("linear_key_head_dim");
    la.num_value_heads = r.positive_int("linear_num_value_heads");
    la.value_head_dim = r.positive_int("linear_value_head_dim");
    la.conv_kernel = r.positive_int("linear_conv_kernel_dim");
    if (la.num_value_heads % la.num_key_heads != 0)
      error(r.where, ": field 'linear_num_value_heads' (", la.num_value_heads, ") must be a multiple of ",
            "'linear_num_key_heads' (", la.num_key_heads, ")");
  }

  // MLPs: dense SwiGLU, except qwen3_next's sparse MoE layers (Qwen2-MoE rule: layer l is sparse when it is not in
  // mlp_only_layers and (l + 1) % decoder_sparse_step == 0).
  c.mlp_kinds.assign(c.num_layers, MlpKind::Dense);
  if (qwen3_next) {
    MoeConfig& m = c.moe;
    m.num_experts = r.positive_int("num_experts");
    m.experts_per_token = r.positive_int("num_experts_per_tok");
    m.expert_intermediate_size = r.positive_int("moe_intermediate_size");
    m.shared_expert_intermediate_size = r.positive_int("shared_expert_intermediate_size");
    if (!r.present("norm_topk_prob"))
      error(r.where, ": field 'norm_topk_prob' is missing (expected true or false)");
    m.norm_topk_prob = r.bool_or("norm_topk_prob", true);
    if (m.experts_per_token > m.num_experts)
      error(r.where, ": field 'num_experts_per_tok' (", m.experts_per_token, ") exceeds 'num_experts' (",
            m.num_experts, ")");
    const int step = r.positive_int_or("decoder_sparse_step", 1);
    std::vector<bool> dense_only(c.num_layers, false);
    if (r.present("mlp_only_layers")) {
      const json& only = cfg.at("mlp_only_layers");
      if (!only.is_array()) error(r.where, ": field 'mlp_only_layers': expected a list of layer indices");
      for (const json& v : only) {
        if (!v.is_number_unsigned() || v.get<int64_t>() >= c.num_layers)
          error(r.where, ": field 'mlp_only_layers': ", v.dump(), " is not a layer index below ", c.num_layers);
        dense_only[v.get<int64_t>()] = true;
      }
    }
    for (int l = 0; l < c.num_layers; ++l)
      if (!dense_only[l] && (l + 1) % step == 0) c.mlp_kinds[l] = MlpKind::SparseMoe;
  } else {
    for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok",
                            "moe_intermediate_size"}) {
      if (r.present(key) && !(cfg.at(key).is_number() && cfg.at(key).get<double>() == 0))
        error(r.where, ": field '", key, "': mixture-of-experts layers are not implemented by the oracle for ",
              c.architecture);
    }
  }
  return c;
}

// inv_freq[i] = theta^(-2i/d), computed in float32 as Hugging Face does (1.0 / (theta ** (arange(0, d, 2) / d)) on
// float32 tensors: the exponent, the power and the quotient each rounded to float32).
// Llama 3 ("llama3", Meta's rule), applied to those: with wavelen = 2*pi/f, L = original context,
// low_wavelen = L/low_freq_factor, high_wavelen = L/high_freq_factor:
//   wavelen < high_wavelen           -> f             (high frequencies unchanged)
//   wavelen > low_wavelen            -> f / factor    (low frequencies scaled)
//   otherwise, smooth = (L/wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
//                                    -> (1 - smooth) * f / factor + smooth * f
// computed in double and rounded to float32 (HF's float32 buffer).
std::vector<double> rope_inv_freq(int rotary_dim, double theta, const RopeScaling& s) {
  std::vector<double> inv_freq(rotary_dim / 2);
  const double theta32 = static_cast<float>(theta);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    const float power = static_cast<float>(std::pow(theta32, static_cast<double>(exponent)));
    const double f = static_cast<float>(1.0 / power);
    if (s.type != "llama3") {
      inv_freq[i] = f;
      continue;
    }
    const double wavelen = 2 * std::numbers::pi / f;
    const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    double scaled = f;
    if (wavelen > low_wavelen) {
      scaled = f / s.factor;
    } else if (!(wavelen < high_wavelen)) {
      const double smooth =
          (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      scaled = (1 - smooth) * f / s.factor + smooth * f;
    }
    inv_freq[i] = static_cast<float>(scaled);
  }
  return inv_freq;
}

// ---- weights --------------------------------------------------------------------------------------------------

struct CheckpointWeights::Impl {
  std::string dir;
  std::vector<std::unique_ptr<MappedFile>> files;
  std::map<std::string, ParsedTensor> tensors;
  std::string layout;  // "model.safetensors" or "model.safetensors.index.json", for messages

  void add_file(const fs::path& path) {
    files.push_back(std::make_unique<MappedFile>(path));
    for (ParsedTensor& t : parse_safetensors(*files.back())) {
      const std::string name = t.ref.name;
      if (tensors.count(name))
        error(path.string(), ": tensor '", name, "' is also stored in ", tensors.at(name).ref.file);
      tensors.emplace(name, std::move(t));
    }
  }
};

CheckpointWeights::CheckpointWeights() : impl_(std::make_unique<Impl>()) {}
CheckpointWeights::CheckpointWeights(CheckpointWeights&&) noexcept = default;
CheckpointWeights& CheckpointWeights::operator=(CheckpointWeights&&) noexcept = default;
CheckpointWeights::~CheckpointWeights() = default;

CheckpointWeights CheckpointWeights::open(const fs::path& dir) {
  CheckpointWeights w;
  Impl& im = *w.impl_;
  im.dir = dir.string();
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {  // as Hugging Face: the single file first, then the index
    im.layout = "model.safetensors";
    im.add_file(single);
    return w;
  }
  if (!fs::exists(index))
    error(dir.string(), ": no model.safetensors or model.safetensors.index.json (expected safetensors weights)");
  im.layout = "model.safetensors.index.json";
  const json idx = read_json_file(index, "model.safetensors.index.json");
  if (!idx.is_object() || !idx.contains("weight_map") || !idx.at("weight_map").is_object())
    error(index.string(), ": field 'weight_map' is missing or not an object");
  std::set<std::string> shards;
  for (const auto& [name, shard] : idx.at("weight_map").items()) {
    if (!shard.is_string()) error(index.string(), ": field 'weight_map.", name, "': expected a file name");
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      error(index.string(), ": field 'weight_map.", name, "': '", s, "' is not a file name in the checkpoint");
    shards.insert(s);
  }
  if (shards.empty()) error(index.string(), ": field 'weight_map' names no tensors");
  for (const std::string& s : shards) {
    if (!fs::exists(dir / s)) error(index.string(), ": shard '", s, "' named in 'weight_map' does not exist");
    im.add_file(dir / s);
  }
  for (const auto& [name, shard] : idx.at("weight_map").items()) {
    const auto it = im.tensors.find(name);
    const std::string expected = (dir / shard.get<std::string>()).string();
    if (it == im.tensors.end() || it->second.ref.file != expected)
      error(index.string(), ": 'weight_map' puts tensor '", name, "' in ", shard.get<std::string>(),
            " but that shard does not contain it");
  }
  return w;
}

bool CheckpointWeights::has(const std::string& name) const { return impl_->tensors.count(name) != 0; }

std::size_t CheckpointWeights::count() const { return impl_->tensors.size(); }

const TensorRef& CheckpointWeights::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end())
    error(impl_->dir, ": tensor '", name, "' is missing from ", impl_->layout, " (expected shape ", shape_text(shape),
          ")");
  const ParsedTensor& t = it->second;
  if (!t.unsupported_dtype.empty())
    error(t.ref.file, ": tensor '", name, "': dtype ", t.unsupported_dtype,
          " is not supported by the oracle (expected BF16, F16 or F32)");
  if (t.ref.shape != shape)
    error(t.ref.file, ": tensor '", name, "': shape ", shape_text(t.ref.shape), ", expected ", shape_text(shape));
  return t.ref;
}

}  // namespace mi::oracle
