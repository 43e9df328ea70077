#include "generator/model_emitter.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "ckb/family_weights.h"
#include "ckb/lint.h"
#include "common/error.h"
#include "common/json_file.h"

namespace mi::generator {
namespace {

// The member name a weight gets in the generated code: the path component naming the module
// ("model.layers.{L}.self_attn.q_proj.weight" -> "q_proj", "model.norm.weight" -> "norm").
std::string role_of(const std::string& weight_name) {
  std::vector<std::string> parts;
  std::stringstream ss(weight_name);
  std::string p;
  while (std::getline(ss, p, '.')) parts.push_back(p);
  if (parts.size() < 2) fail("weight name '", weight_name, "' has no module component");
  return parts[parts.size() - 2];
}

std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size())
    text.replace(pos, from.size(), to);
  return text;
}

bool has_step(const ckb::Family& f, const std::string& step) {
  return std::count(f.forward_layer.begin(), f.forward_layer.end(), step) > 0;
}

// One decoder-layer step -> its C++ (inside Model::forward_impl<N>, with l, w, T, seq, start in scope; or inside
// Model::forward_batch_impl<N>, with l, w, T = B rows, seqs and positions in scope, when `batched`). Only the steps
// that depend on a row's sequence or position (rope, attention) differ: every other step is the same row-batched
// code, so each weight matrix is read once per batched decode step for all B rows.
std::string emit_layer_step(const std::string& step, bool qk_norm, bool batched) {
  if (step == "input_norm")
    return "    mi::model::rms_norm_rows<K>(pool_, x_, w.input_layernorm.data(), h_, T, kHidden, kEps);\n";
  if (step == "qkv_proj") {
    const char* q = qk_norm ? "q_raw_" : "q_";
    const char* k = qk_norm ? "k_raw_" : "k_";
    return std::string("    {\n      const In* hin = mi::model::matmul_input<K, N>(pool_, h_, std::size_t(T) * kHidden, rounded<N>());\n") +
           "      mi::model::linear<K>(pool_, w.q_proj, kHeads * kHeadDim, kHidden, hin, T, " + q + ");\n" +
           "      mi::model::linear<K>(pool_, w.k_proj, kKvHeads * kHeadDim, kHidden, hin, T, " + k + ");\n" +
           "      mi::model::linear<K>(pool_, w.v_proj, kKvHeads * kHeadDim, kHidden, hin, T, v_);\n    }\n";
  }
  if (step == "qk_norm")
    return "    mi::model::head_rms_norm<K>(pool_, q_raw_, w.q_norm.data(), q_, T, kHeads, kHeadDim, kEps);\n"
           "    mi::model::head_rms_norm<K>(pool_, k_raw_, w.k_norm.data(), k_, T, kKvHeads, kHeadDim, kEps);\n";
  if (step == "rope" && batched)
    return "    mi::model::apply_rotary_at<K>(pool_, rotary_, q_, T, std::size_t(kHeads) * kHeadDim, kHeads, kHeadDim, positions);\n"
           "    mi::model::apply_rotary_at<K>(pool_, rotary_, k_, T, std::size_t(kKvHeads) * kHeadDim, kKvHeads, kHeadDim, positions);\n";
  if (step == "attention" && batched)
    return "    for (int b = 0; b < T; ++b)\n"
           "      mi::model::store_kv(cache_, seqs[b], l, positions[b], 1, k_ + std::size_t(b) * kKvHeads * kHeadDim,\n"
           "                          v_ + std::size_t(b) * kKvHeads * kHeadDim, kKvHeads, kHeadDim);\n"
           "    mi::model::decode_attention_batch<K>(pool_, cache_, seqs, T, l, {kHeads, kKvHeads, kHeadDim}, q_, attn_, scores_);\n";
  if (step == "rope")
    return "    mi::model::apply_rotary<K>(pool_, rotary_, q_, T, std::size_t(kHeads) * kHeadDim, kHeads, kHeadDim, start);\n"
           "    mi::model::apply_rotary<K>(pool_, rotary_, k_, T, std::size_t(kKvHeads) * kHeadDim, kKvHeads, kHeadDim, start);\n";
  if (step == "attention")
    return "    mi::model::store_kv(cache_, seq, l, start, T, k_, v_, kKvHeads, kHeadDim);\n"
           "    mi::model::causal_attention<K>(pool_, cache_, seq, l, {kHeads, kKvHeads, kHeadDim}, q_, T, start, attn_, scores_);\n";
  if (step == "o_proj")
    return "    {\n      const In* ain = mi::model::matmul_input<K, N>(pool_, attn_, std::size_t(T) * kHeads * kHeadDim, rounded<N>());\n"
           "      mi::model::linear<K>(pool_, w.o_proj, kHidden, kHeads * kHeadDim, ain, T, o_);\n    }\n";
  if (step == "residual_add") return "    K::add(o_, x_, T * kHidden);\n";
  if (step == "post_attention_norm")
    return "    mi::model::rms_norm_rows<K>(pool_, x_, w.post_attention_layernorm.data(), h_, T, kHidden, kEps);\n";
  if (step == "swiglu_mlp")
    return "    mi::model::swiglu_mlp<K, N>(pool_, w.gate_proj, w.up_proj, w.down_proj, kHidden, kIntermediate, h_, T, o_, mlp_scratch<N>());\n";
  fail("generator: no emitter for forward step '", step, "'");
}

std::string emit_final_step(const std::string& step) {
  if (step == "final_norm")
    return "  mi::model::rms_norm_rows<K>(pool_, x_ + std::size_t(first_row) * kHidden, norm_.data(), h_, rows, kHidden, kEps);\n";
  if (step == "lm_head")
    return "  {\n    const In* hin = mi::model::matmul_input<K, N>(pool_, h_, std::size_t(rows) * kHidden, rounded<N>());\n"
           "    mi::model::lm_head<K>(pool_, lm_head_, kVocab, kHidden, hin, rows, logits);\n  }\n";
  fail("generator: no emitter for final step '", step, "'");
}

const char* kModelTemplate = R"CPP(// GENERATED by metainfer @VERSION@ from the CKB family '@FAMILY@' for @ARCH@ (@ENGINE@).
// The forward path of exactly this model: dimensions, layer steps, weight names, dtype and kernel level are fixed
// here at build time (MANIFEST.json names the CKB version and every source file). Regenerate, do not edit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/json_file.h"
#include "engine/model_interface.h"
#include "engine_config.h"
#include "io/model_config.h"
#include "io/required_weights.h"
#include "io/safetensors.h"
#include "@KERNEL_HEADER@"
#include "model/attention.h"
#include "model/embedding.h"
@INT8_INCLUDE@#include "model/linear.h"
#include "model/lm_head.h"
#include "model/op_profiler.h"
#include "model/rms_norm.h"
#include "model/rotary.h"
#include "model/scratch_arena.h"
#include "model/swiglu_mlp.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace engine {

class Model {
 public:
  using K = @KERNEL_STRUCT@;  // kernel level @LEVEL@
  using W = @WEIGHT_TYPE@;    // weights as stored in the checkpoint (@STORED_DTYPE@), memory-mapped
  using Mat = @MATRIX_TYPE@;  // a projection matrix as the linear layers read it (@DTYPE@)
  static constexpr int kVocab = config::kVocabSize;
  static constexpr int kHidden = config::kHidden;
  static constexpr int kIntermediate = config::kIntermediate;
  static constexpr int kLayers = config::kLayers;
  static constexpr int kHeads = config::kHeads;
  static constexpr int kKvHeads = config::kKvHeads;
  static constexpr int kHeadDim = config::kHeadDim;
  static constexpr float kEps = config::kRmsNormEps;

  Model(const std::filesystem::path& checkpoint_dir, const mi::engine::RuntimeOptions& options)
      : options_(checked(options)),
        config_(mi::io::load_model_config(checkpoint_dir)),
        store_(mi::io::WeightStore::open(checkpoint_dir)),
        pool_(options_.threads),
        rotary_(kHeadDim, options_.max_context, config::kRopeTheta, rope_scaling()),
        cache_({kLayers, kKvHeads, kHeadDim, options_.max_batch, options_.max_context, options_.kv_block_size,
                options_.prefix_cache}),
        arena_(scratch_plan(options_).bytes) {
    check_config(checkpoint_dir);
    mi::io::check_required_weights(store_, required_weights(), mi::io::DType::@DTYPE_ENUM@);
    bind_weights();
    allocate_scratch();
  }

  mi::engine::ModelFacts facts() const {
    return {config::kArchitecture, config::kFamily, config::kKernelLevel, kVocab, config::kMaxPositionEmbeddings};
  }
  int vocab_size() const { return kVocab; }
  std::vector<int> eos_token_ids() const { return config_.eos_token_ids; }
  const mi::io::ModelConfig& model_config() const { return config_; }
  const mi::engine::RuntimeOptions& options() const { return options_; }
  int new_sequence() { return cache_.allocate_sequence(); }
  void free_sequence(int seq) { cache_.free_sequence(seq); }
  int sequence_length(int seq) const { return cache_.length(seq); }
  // The paged KV cache (the server's prefix cache and usage gauges).
  mi::runtime::KvCache& kv_cache() { return cache_; }

  // Appends n tokens of `seq` and writes logits: [vocab] of the last token, or [n, vocab] when all_rows.
  void forward(int seq, const int32_t* ids, int n, float* logits, bool all_rows) {
    if (n <= 0) mi::fail("forward: expected at least one token, got ", n);
    if (n > max_step_tokens_)
      mi::fail("forward: ", n, " tokens in one step exceed the scratch sized for ", max_step_tokens_,
               " (runtime.chunked_prefill / max_context)");
    for (int i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= kVocab) mi::fail("token id ", ids[i], " is outside the vocabulary [0, ", kVocab, ")");
@FORWARD_DISPATCH@
  }

  // One decode step of B distinct live sequences together: appends ids[b] to seqs[b] and writes the logits of each
  // new token, row b of [B, vocab] for seqs[b]. Every linear layer runs once over the B rows (each weight read once
  // per step); rotary and attention use each row's own position and sequence. Checked before anything changes:
  // 1 <= B <= max_batch, every id in the vocabulary, every sequence alive, distinct, with room for one more token.
  void forward_batch(const int* seqs, const int32_t* ids, int B, float* logits) {
    if (B < 1) mi::fail("forward_batch: expected at least one sequence, got ", B);
    if (B > options_.max_batch)
      mi::fail("forward_batch: ", B, " sequences exceed the engine's max_batch of ", options_.max_batch, " (--max-batch)");
    if (B > max_step_tokens_)
      mi::fail("forward_batch: ", B, " rows exceed the scratch sized for ", max_step_tokens_, " tokens per step");
    for (int b = 0; b < B; ++b) {
      if (ids[b] < 0 || ids[b] >= kVocab) mi::fail("token id ", ids[b], " is outside the vocabulary [0, ", kVocab, ")");
      for (int c = 0; c < b; ++c)
        if (seqs[c] == seqs[b]) mi::fail("forward_batch: sequence ", seqs[b], " appears twice (rows ", c, " and ", b, ")");
      const int length = cache_.length(seqs[b]);  // mi::Error for a sequence that is not alive
      if (length + 1 > options_.max_context)
        mi::fail("forward_batch: sequence ", seqs[b], " is full (", length, " tokens, max_context ", options_.max_context, ")");
    }
@BATCH_DISPATCH@
  }

  // Per-operation timing of the next forward steps (null: off). The profiler's ops are op_names(), in order.
  void set_profiler(mi::model::OpProfiler* profiler) { profiler_ = profiler; }
  static std::vector<std::string> op_names() { return {@OP_NAMES@}; }

  // Every tensor this model reads, with its shape (from the CKB family's weight declarations).
  static std::vector<mi::io::RequiredTensor> required_weights() {
    std::vector<mi::io::RequiredTensor> r;
@REQUIRED@    return r;
  }

 private:
  struct LayerWeights {
@LAYER_FIELDS@  };

  // A level that needs the OS's consent (AMX tiles) is checked before anything runs, not at the first long prompt.
  // A template, so that for levels without available() the check is discarded rather than ill-formed.
  template <class L>
  static void check_level_available() {
    if constexpr (requires { L::available(); })
      if (!L::available())
        mi::fail("kernel level ", L::name, ": this CPU or OS does not provide it (AMX needs CPUID AMX-TILE/AMX-BF16 and "
                 "Linux granting the tile state via arch_prctl); generate the engine for another platform");
  }

  static mi::engine::RuntimeOptions checked(mi::engine::RuntimeOptions o) {
    check_level_available<K>();
    if (o.threads < 1) mi::fail("--threads: expected >= 1, got ", o.threads);
    if (o.max_batch < 1) mi::fail("max_batch: expected >= 1, got ", o.max_batch);
    if (o.max_context < 1 || o.max_context > config::kMaxPositionEmbeddings)
      mi::fail("max_context: expected 1..", config::kMaxPositionEmbeddings, ", got ", o.max_context);
    return o;
  }

  static std::optional<mi::model::Llama3RopeScaling> rope_scaling() {
@ROPE_SCALING@  }

  // The checkpoint must be the model this engine was generated for: every field of its config.json that can change
  // the computation equals the config.json the engine was generated for (engine_config.h; the CKB family's
  // config_ignored lists the fields that cannot), then the dimensions and numerics-relevant values as parsed.
  void check_config(const std::filesystem::path& checkpoint_dir) const {
    const std::filesystem::path path = checkpoint_dir / "config.json";
    mi::io::check_config_matches(mi::read_json_file(path), nlohmann::json::parse(config::kGeneratedConfigJson),
                                 nlohmann::json::parse(config::kConfigIgnoredFieldsJson).get<std::vector<std::string>>(),
                                 path.string());
    const auto& c = config_;
    auto expect = [&](const char* field, long long actual, long long expected) {
      if (actual != expected)
        mi::fail("config.json: field '", field, "': this engine was generated for ", expected, ", the checkpoint has ", actual);
    };
    expect("vocab_size", c.vocab_size, kVocab);
    expect("hidden_size", c.hidden_size, kHidden);
    expect("intermediate_size", c.intermediate_size, kIntermediate);
    expect("num_hidden_layers", c.num_hidden_layers, kLayers);
    expect("num_attention_heads", c.num_attention_heads, kHeads);
    expect("num_key_value_heads", c.num_key_value_heads, kKvHeads);
    expect("head_dim", c.head_dim, kHeadDim);
    expect("tie_word_embeddings", c.tie_word_embeddings, config::kTiedEmbeddings);
    if (float(c.rms_norm_eps) != kEps) mi::fail("config.json: field 'rms_norm_eps': this engine was generated for ", kEps, ", the checkpoint has ", c.rms_norm_eps);
    if (c.rope_theta != config::kRopeTheta) mi::fail("config.json: field 'rope_theta': this engine was generated for ", config::kRopeTheta, ", the checkpoint has ", c.rope_theta);
    if (c.rope_scaling.has_value() != config::kRopeScaling)
      mi::fail("config.json: field 'rope_scaling': this engine was generated ", config::kRopeScaling ? "with" : "without", " rope scaling");
  }

  const W* mapped(const std::string& name) const { return store_.get(name).as<W>(); }
@MATRIX_FN@  std::vector<float> vector(const std::string& name, int n) const {
    const W* w = store_.get(name).as<W>();
    std::vector<float> out(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out[std::size_t(i)] = mi::model::widen_weight(w[i]);
    return out;
  }

  void bind_weights() {
@BIND@  }

  static int step_tokens(const mi::engine::RuntimeOptions& o) {
    return config::kChunkedPrefill > 0 ? std::min(config::kChunkedPrefill, o.max_context) : o.max_context;
  }

  static mi::model::ScratchPlan scratch_plan(const mi::engine::RuntimeOptions& o) {
    const std::size_t T = std::size_t(step_tokens(o)), H = kHidden, Q = std::size_t(kHeads) * kHeadDim,
                      KV = std::size_t(kKvHeads) * kHeadDim, I = kIntermediate;
    mi::model::ScratchPlan p;
    p.add<float>(T * H).add<float>(T * H).add<float>(T * Q).add<float>(T * Q).add<float>(T * KV).add<float>(T * KV);
    p.add<float>(T * KV).add<float>(T * Q).add<float>(T * H).add<float>(T * I).add<float>(T * I).add<float>(T * I);
    p.add<float>(mi::model::attention_scratch_floats(o.threads, o.max_context));
    p.add<mi::bf16_t>(T * std::max({H, Q, I}));  // bf16-rounded matmul inputs (fast numerics)
    p.add<int>(std::size_t(o.max_batch));        // positions of a batched decode step
    return p;
  }

  void allocate_scratch() {
    max_step_tokens_ = step_tokens(options_);
    const std::size_t T = std::size_t(max_step_tokens_), H = kHidden, Q = std::size_t(kHeads) * kHeadDim,
                      KV = std::size_t(kKvHeads) * kHeadDim, I = kIntermediate;
    x_ = arena_.take<float>(T * H);
    h_ = arena_.take<float>(T * H);
    q_raw_ = arena_.take<float>(T * Q);
    q_ = arena_.take<float>(T * Q);
    k_raw_ = arena_.take<float>(T * KV);
    k_ = arena_.take<float>(T * KV);
    v_ = arena_.take<float>(T * KV);
    attn_ = arena_.take<float>(T * Q);
    o_ = arena_.take<float>(T * H);
    gate_ = arena_.take<float>(T * I);
    up_ = arena_.take<float>(T * I);
    act_ = arena_.take<float>(T * I);
    scores_ = arena_.take<float>(mi::model::attention_scratch_floats(options_.threads, options_.max_context));
    rounded_bf16_ = arena_.take<mi::bf16_t>(T * std::max({H, Q, I}));
    batch_positions_ = arena_.take<int>(std::size_t(options_.max_batch));
  }

  template <mi::model::Numerics N>
  mi::model::MatmulInput<N>* rounded() {
    if constexpr (N == mi::model::Numerics::fast) return rounded_bf16_;
    else return nullptr;
  }
  template <mi::model::Numerics N>
  mi::model::MlpScratch<N> mlp_scratch() {
    return {gate_, up_, act_, rounded<N>(), rounded<N>()};  // x is consumed before act is rounded
  }

  // The forward path of @ARCH@, one decoder layer written out in CKB order:
  //   @STEPS@
  template <mi::model::Numerics N>
  void forward_impl(int seq, const int32_t* ids, int T, float* logits, bool all_rows) {
    using In = mi::model::MatmulInput<N>;
    const int start = cache_.append(seq, T);
@EMBED_STEP@    for (int l = 0; l < kLayers; ++l) {
      const LayerWeights& w = layers_[std::size_t(l)];
@LAYER_STEPS@    }
    const int first_row = all_rows ? 0 : T - 1, rows = T - first_row;
@FINAL_STEPS@  }

  // The same layer steps over T = B rows, one new token of sequence seqs[b] in row b (forward_batch checked them).
  template <mi::model::Numerics N>
  void forward_batch_impl(const int* seqs, const int32_t* ids, int T, float* logits) {
    using In = mi::model::MatmulInput<N>;
    int* positions = batch_positions_;
    for (int b = 0; b < T; ++b) positions[b] = cache_.append(seqs[b], 1);
@EMBED_STEP@    for (int l = 0; l < kLayers; ++l) {
      const LayerWeights& w = layers_[std::size_t(l)];
@BATCH_LAYER_STEPS@    }
    const int first_row = 0, rows = T;
@FINAL_STEPS@  }

  mi::engine::RuntimeOptions options_;
  mi::io::ModelConfig config_;
  mi::io::WeightStore store_;
  mi::runtime::ThreadPool pool_;
  mi::model::RotaryTable rotary_;
  mi::runtime::KvCache cache_;
  mi::model::ScratchArena arena_;
  int max_step_tokens_ = 0;
  mi::model::OpProfiler* profiler_ = nullptr;
@GLOBAL_FIELDS@  std::vector<LayerWeights> layers_;
  float *x_, *h_, *q_raw_, *q_, *k_raw_, *k_, *v_, *attn_, *o_, *gate_, *up_, *act_, *scores_;
  mi::bf16_t* rounded_bf16_;
  int* batch_positions_;
};

static_assert(mi::engine::EngineModel<Model>);

}  // namespace engine
)CPP";

const char* kConfigTemplate = R"CPP(// GENERATED by metainfer @VERSION@ for @ARCH@ (@ENGINE@). Everything this engine fixes at build time.
#pragma once

#define MI_ENGINE_HAS_TOKENIZER @HAS_TOKENIZER@

namespace engine::config {

inline constexpr const char* kEngineName = "@ENGINE@";
inline constexpr const char* kArchitecture = "@ARCH@";
inline constexpr const char* kFamily = "@FAMILY@";
inline constexpr const char* kKernelLevel = "@LEVEL@";
inline constexpr const char* kPlatform = "@PLATFORM@";
inline constexpr const char* kWeightDtype = "@DTYPE@";

// Model dimensions (config.json of the checkpoint the engine was generated for).
inline constexpr int kVocabSize = @VOCAB@;
inline constexpr int kHidden = @HIDDEN@;
inline constexpr int kIntermediate = @INTER@;
inline constexpr int kLayers = @LAYERS@;
inline constexpr int kHeads = @HEADS@;
inline constexpr int kKvHeads = @KV_HEADS@;
inline constexpr int kHeadDim = @HEAD_DIM@;
inline constexpr int kMaxPositionEmbeddings = @MAX_POS@;
inline constexpr float kRmsNormEps = @EPS@f;
inline constexpr double kRopeTheta = @THETA@;
inline constexpr bool kTiedEmbeddings = @TIED@;
inline constexpr bool kRopeScaling = @ROPE_SCALING@;

// The config.json this engine was generated for, less the fields that cannot change the computation (the CKB family's
// config_ignored, listed below) and null values. The engine refuses (exit 2, naming the field) a checkpoint whose
// config.json differs from it in any field: another architecture, activation, bias, sliding window, MoE, rope.
inline constexpr const char* kGeneratedConfigJson = R"@RAW@(@CONFIG_JSON@)@RAW@";
inline constexpr const char* kConfigIgnoredFieldsJson = R"@RAW@(@CONFIG_IGNORED@)@RAW@";

// Runtime defaults from the constraints (the command line may lower threads, max_context).
inline constexpr int kThreads = @THREADS@;
inline constexpr int kMaxBatch = @MAX_BATCH@;
inline constexpr int kMaxContext = @MAX_CONTEXT@;
inline constexpr int kKvBlockSize = @KV_BLOCK@;
inline constexpr int kChunkedPrefill = @CHUNKED@;
inline constexpr bool kPrefixCache = @PREFIX_CACHE@;
inline constexpr bool kFastNumericsDefault = @FAST@;
inline constexpr bool kHasTokenizer = @HAS_TOKENIZER_BOOL@;

}  // namespace engine::config
)CPP";

std::string fmt_double(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  std::string s = out.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string emit_engine_config(const ckb::Family& family, const coverage::Plan& plan, const EmitOptions& options) {
  const io::ModelConfig& c = *plan.config;
  // The generation-time config.json, sorted (nlohmann::json objects are ordered maps): deterministic for the same input.
  const nlohmann::json relevant =
      io::computation_relevant_config(read_json_file(plan.constraints.model / "config.json"), family.config_ignored);
  const std::string config_json = relevant.dump(2, ' ', true);
  const std::string ignored_json = nlohmann::json(family.config_ignored).dump(-1, ' ', true);
  const std::string raw_delimiter = "MICONFIG";
  for (const std::string& text : {config_json, ignored_json})
    if (text.find(")" + raw_delimiter + "\"") != std::string::npos)
      fail("generator: config.json contains the raw-string delimiter )", raw_delimiter, "\"");
  std::string s = kConfigTemplate;
  const std::map<std::string, std::string> values = {
      {"@VERSION@", METAINFER_VERSION},
      {"@ENGINE@", options.engine_name},
      {"@ARCH@", c.architecture},
      {"@FAMILY@", family.id},
      {"@LEVEL@", plan.kernel_level},
      {"@PLATFORM@", plan.platform},
      {"@DTYPE@", plan.dtype},
      {"@VOCAB@", std::to_string(c.vocab_size)},
      {"@HIDDEN@", std::to_string(c.hidden_size)},
      {"@INTER@", std::to_string(c.intermediate_size)},
      {"@LAYERS@", std::to_string(c.num_hidden_layers)},
      {"@HEADS@", std::to_string(c.num_attention_heads)},
      {"@KV_HEADS@", std::to_string(c.num_key_value_heads)},
      {"@HEAD_DIM@", std::to_string(c.head_dim)},
      {"@MAX_POS@", std::to_string(c.max_position_embeddings)},
      {"@EPS@", fmt_double(float(c.rms_norm_eps))},
      {"@THETA@", fmt_double(c.rope_theta)},
      {"@TIED@", c.tie_word_embeddings ? "true" : "false"},
      {"@ROPE_SCALING@", c.rope_scaling ? "true" : "false"},
      {"@THREADS@", std::to_string(plan.threads)},
      {"@MAX_BATCH@", std::to_string(plan.constraints.max_batch)},
      {"@MAX_CONTEXT@", std::to_string(plan.constraints.max_context)},
      {"@KV_BLOCK@", std::to_string(plan.constraints.kv_block_size)},
      {"@CHUNKED@", std::to_string(plan.constraints.chunked_prefill)},
      {"@PREFIX_CACHE@", plan.constraints.prefix_cache ? "true" : "false"},
      {"@FAST@", plan.constraints.numerics == "fast" ? "true" : "false"},
      {"@HAS_TOKENIZER@", plan.tokenizer_present ? "1" : "0"},
      {"@HAS_TOKENIZER_BOOL@", plan.tokenizer_present ? "true" : "false"},
  };
  for (const auto& [k, v] : values) s = replace_all(s, k, v);
  // Last: the JSON text itself is never searched for placeholders.
  s = replace_all(s, "@RAW@", raw_delimiter);
  s = replace_all(s, "@CONFIG_IGNORED@", ignored_json);
  s = replace_all(s, "@CONFIG_JSON@", config_json);
  return s;
}

std::string emit_model(const ckb::Family& family, const coverage::Plan& plan, const EmitOptions& options) {
  const io::ModelConfig& c = *plan.config;
  if (!family.layer_kinds.empty())
    fail("generator: family ", family.id, " declares layer kinds; the generator emits one uniform dense layer "
         "([forward].layer) and has no emitter for them (coverage reports this as a gap)");
  for (const auto& step : family.forward_layer)
    if (std::find(ckb::known_forward_steps().begin(), ckb::known_forward_steps().end(), step) ==
        ckb::known_forward_steps().end())
      fail("generator: family ", family.id, ": unknown forward step '", step, "'");
  const bool qk_norm = has_step(family, "qk_norm");
  const bool tied = c.tie_word_embeddings;

  // Weights: per-layer members, global members, the required table and the binding code.
  std::ostringstream layer_fields, global_fields, required, bind;
  std::set<std::string> declared_roles;
  bind << "    const int n_layers = kLayers;\n";
  std::ostringstream bind_layer;
  for (const auto& w : family.weights) {
    if ((w.when == "tied" && !tied) || (w.when == "untied" && tied)) continue;
    const std::string role = role_of(w.name);
    const bool per_layer = w.name.find("{L}") != std::string::npos;
    const bool is_vector = w.shape.size() == 1;
    std::string dims;
    for (const auto& e : w.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(ckb::eval_shape_expr(e, nlohmann::json{
        {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
        {"num_hidden_layers", c.num_hidden_layers}, {"num_attention_heads", c.num_attention_heads},
        {"num_key_value_heads", c.num_key_value_heads}, {"head_dim", c.head_dim}}, "weight " + w.name));
    const std::string length = is_vector ? dims : "";
    // Embedding lookups read the mapped table; every other matrix is a projection (Mat: mapped, or int8 at load).
    const bool lookup = role == "embed_tokens";
    const std::string matrix_type = lookup ? "const W* " : "Mat ";
    const std::string matrix_fn = lookup ? "mapped(" : "matrix(";
    if (per_layer) {
      const std::size_t pos = w.name.find("{L}");
      const std::string prefix = w.name.substr(0, pos), suffix = w.name.substr(pos + 3);
      required << "    for (int l = 0; l < kLayers; ++l) r.push_back({" << cpp_string(prefix) << " + std::to_string(l) + "
               << cpp_string(suffix) << ", {" << dims << "}});\n";
      layer_fields << "    " << (is_vector ? "std::vector<float> " : matrix_type) << role << (is_vector ? ";" : " = nullptr;")
                   << "  // " << w.name << " [" << dims << "] (contract " << w.contract << ")\n";
      bind_layer << "      w." << role << " = " << (is_vector ? "vector(" : matrix_fn) << "p + " << cpp_string(suffix)
                 << (is_vector ? ", " + length + ")" : ")") << ";\n";
      // prefix is the same for every per-layer weight ("model.layers."); checked below.
      if (prefix != "model.layers.") fail("generator: per-layer weight '", w.name, "' does not start with model.layers.{L}.");
    } else {
      required << "    r.push_back({" << cpp_string(w.name) << ", {" << dims << "}});\n";
      global_fields << "  " << (is_vector ? "std::vector<float> " : matrix_type) << role << "_"
                    << (is_vector ? ";" : " = nullptr;") << "  // " << w.name << " [" << dims << "] (contract "
                    << w.contract << ")\n";
      bind << "    " << role << "_ = " << (is_vector ? "vector(" : matrix_fn) << cpp_string(w.name)
           << (is_vector ? ", " + length + ")" : ")") << ";\n";
    }
    declared_roles.insert(role);
  }
  if (tied) {
    global_fields << "  Mat lm_head_ = nullptr;  // tied: the embedding matrix (tie_word_embeddings)\n";
    bind << "    lm_head_ = matrix(\"model.embed_tokens.weight\");  // tie_word_embeddings: the head is the embedding matrix\n";
  }
  bind << "    layers_.resize(std::size_t(n_layers));\n    for (int l = 0; l < n_layers; ++l) {\n"
       << "      const std::string p = \"model.layers.\" + std::to_string(l);\n      LayerWeights& w = layers_[std::size_t(l)];\n"
       << bind_layer.str() << "    }\n";

  // Profiled ops: the embedding, then each distinct step in forward order (a step that occurs twice in a layer,
  // like residual_add, is one op whose time sums both).
  std::vector<std::string> ops = {"embed"};
  auto op_index = [&](const std::string& step) {
    auto it = std::find(ops.begin(), ops.end(), step);
    if (it == ops.end()) it = ops.insert(ops.end(), step);
    return std::to_string(it - ops.begin());
  };
  // Each step in its own scope, timed as its op when a profiler is set.
  auto timed = [](const std::string& indent, const std::string& index, const std::string& code) {
    return indent + "{\n" + indent + "  const mi::model::OpTimer op_timer(profiler_, " + index + ");\n" + code + indent + "}\n";
  };
  const std::string embed_step =
      timed("    ", op_index("embed"), "    mi::model::embed_tokens(embed_tokens_, kVocab, kHidden, ids, T, x_);\n");
  std::string steps_comment, layer_steps, batch_layer_steps, final_steps;
  for (const auto& step : family.forward_layer) {
    steps_comment += (steps_comment.empty() ? "" : " -> ") + step;
    const std::string index = op_index(step);
    layer_steps += "    // " + step + "\n" + timed("    ", index, emit_layer_step(step, qk_norm, false));
    batch_layer_steps += "    // " + step + "\n" + timed("    ", index, emit_layer_step(step, qk_norm, true));
  }
  for (const auto& step : family.forward_final) {
    steps_comment += " -> " + step;
    final_steps += "  // " + step + "\n" + timed("  ", op_index(step), emit_final_step(step));
  }
  std::string op_names;
  for (const auto& op : ops) op_names += (op_names.empty() ? "" : ", ") + cpp_string(op);

  std::string rope;
  if (c.rope_scaling) {
    std::ostringstream r;
    r << "    // rope_scaling " << c.rope_scaling->rope_type << " (Llama 3 frequency scaling)\n"
      << "    return mi::model::Llama3RopeScaling{" << fmt_double(c.rope_scaling->factor) << ", "
      << fmt_double(c.rope_scaling->low_freq_factor) << ", " << fmt_double(c.rope_scaling->high_freq_factor) << ", "
      << c.rope_scaling->original_max_position_embeddings << "};\n";
    rope = r.str();
  } else {
    rope = "    return std::nullopt;  // no rope scaling\n";
  }

  const std::string level = plan.kernel_level;
  // platform.dtype = "int8" (ckb/contracts/int8_weights.toml): the projections are quantised at load from the stored
  // bf16/f32 matrices, which stay mapped for the embedding lookups only.
  const bool int8 = plan.dtype == "int8";
  const std::string stored = int8 ? plan.weight_dtype : plan.dtype;
  if (int8) {
    global_fields << "  std::deque<mi::model::Int8Matrix> int8_;  // the quantised projections (stable addresses)\n";
    if (stored != "bf16" && stored != "f32")
      fail("generator: int8 weights are quantised from bf16 or f32 matrices; the checkpoint stores ", stored);
  }
  const std::string matrix_fn =
      int8 ? "  // Quantised at load, row by row on the thread pool; the source pages are then released (int8_weights.h).\n"
             "  Mat matrix(const std::string& name) {\n"
             "    const mi::io::TensorView& t = store_.get(name);\n"
             "    int8_.push_back(mi::model::quantize_int8(pool_, t.as<W>(), int(t.shape.at(0)), int(t.shape.at(1)), name));\n"
             "    mi::model::release_mapped_range(t.data, t.nbytes);\n"
             "    return &int8_.back();\n  }\n"
           : "  Mat matrix(const std::string& name) const { return mapped(name); }\n";
  std::string s = kModelTemplate;
  const std::map<std::string, std::string> values = {
      {"@VERSION@", METAINFER_VERSION},
      {"@FAMILY@", family.id},
      {"@ARCH@", c.architecture},
      {"@ENGINE@", options.engine_name},
      {"@KERNEL_HEADER@", "kernels/" + level + "/" + level + ".h"},
      {"@KERNEL_STRUCT@", plan.kernel_struct},
      {"@LEVEL@", level},
      {"@WEIGHT_TYPE@", stored == "f32" ? "float" : "mi::bf16_t"},
      {"@MATRIX_TYPE@", int8 ? "const mi::model::Int8Matrix*" : "const W*"},
      {"@MATRIX_FN@", matrix_fn},
      {"@INT8_INCLUDE@", int8 ? "#include \"model/int8_weights.h\"\n#include <deque>\n" : ""},
      {"@DTYPE@", plan.dtype},
      {"@STORED_DTYPE@", stored},
      {"@DTYPE_ENUM@", stored == "f32" ? "F32" : "BF16"},
      {"@REQUIRED@", required.str()},
      {"@LAYER_FIELDS@", layer_fields.str()},
      {"@GLOBAL_FIELDS@", global_fields.str()},
      {"@BIND@", bind.str()},
      {"@ROPE_SCALING@", rope},
      {"@STEPS@", steps_comment},
      {"@LAYER_STEPS@", layer_steps},
      {"@FINAL_STEPS@", final_steps},
      {"@EMBED_STEP@", embed_step},
      {"@BATCH_LAYER_STEPS@", batch_layer_steps},
      {"@OP_NAMES@", op_names},
      // Fast numerics feed bf16 activations to bf16 weights only: an f32- or int8-weight engine has no fast path.
      {"@BATCH_DISPATCH@",
       plan.dtype != "bf16"
           ? "    if (options_.fast) mi::fail(\"--mode fast needs bf16 weights; this engine has " + plan.dtype + " weights\");\n"
             "    forward_batch_impl<mi::model::Numerics::precise>(seqs, ids, B, logits);"
           : "    if (options_.fast) forward_batch_impl<mi::model::Numerics::fast>(seqs, ids, B, logits);\n"
             "    else forward_batch_impl<mi::model::Numerics::precise>(seqs, ids, B, logits);"},
      {"@FORWARD_DISPATCH@",
       plan.dtype != "bf16"
           ? "    if (options_.fast) mi::fail(\"--mode fast needs bf16 weights; this engine has " + plan.dtype + " weights\");\n"
             "    forward_impl<mi::model::Numerics::precise>(seq, ids, n, logits, all_rows);"
           : "    if (options_.fast) forward_impl<mi::model::Numerics::fast>(seq, ids, n, logits, all_rows);\n"
             "    else forward_impl<mi::model::Numerics::precise>(seq, ids, n, logits, all_rows);"},
  };
  for (const auto& [k, v] : values) s = replace_all(s, k, v);
  return s;
}

}  // namespace mi::generator
