// A family's weight declarations (ckb/families/*.toml [[weights]]) made concrete for one checkpoint: {L} expanded
// over the layers, shape expressions evaluated against config.json, the tied/untied variant chosen.
// Coverage uses it to find unmapped and missing weights; the generator emits the same list into the engine.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"

namespace mi::ckb {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string contract;
};

// A config term of the text config: the key itself, with HF defaults where config.json may omit it
// (head_dim = hidden_size / num_attention_heads, num_key_value_heads = num_attention_heads). nullopt if absent.
std::optional<int64_t> config_term(const nlohmann::json& text_config, const std::string& term);

// "num_attention_heads*head_dim", "2*a*b+c*d" or "128" -> value (a sum of products of config terms and integers).
// Throws mi::Error naming `context` if a term is missing.
int64_t eval_shape_expr(const std::string& expr, const nlohmann::json& text_config, const std::string& context);

// Every weight the family requires for this config (tied: no "untied" entries; untied: no "tied" entries).
// {L} runs over all layers, or, for a weight of a layer kind, over the layers whose config layer_types value is the
// kind's; {E} runs over num_experts. Names are as stored under `architecture` (the family's name map, if any).
std::vector<ExpectedTensor> expected_weights(const Family& family, const nlohmann::json& text_config, bool tied,
                                             const std::string& architecture = "");

// Whether the checkpoint tensor `name` matches any declaration of the family (either head variant), {L} and {E}
// matching any index, names as stored under `architecture`. A tensor the name map ignores counts as declared.
bool family_declares(const Family& family, const std::string& name, const std::string& architecture = "");

// The role of a weight in the generated model: its `role` field, else derived from the declared name. Per-layer
// weights: the path after "layers.{L}." without ".weight" and the expert index, dots as underscores
// ("model.layers.{L}.self_attn.q_proj.weight" -> self_attn_q_proj, "...mlp.experts.{E}.up_proj.weight" ->
// mlp_experts_up_proj, "...linear_attn.A_log" -> linear_attn_A_log). Global weights: the module name
// ("model.embed_tokens.weight" -> embed_tokens, "model.norm.weight" -> norm, "lm_head.weight" -> lm_head).
std::string weight_role(const WeightDecl& weight);

// The layer indices of a layer kind for this config: every layer for layer_type "*", else those whose
// layer_types entry equals it. Throws mi::Error if layer_types is needed and absent or of the wrong length.
std::vector<int> layers_of_kind(const LayerKind& kind, const nlohmann::json& text_config, const std::string& context);

// The per-layer pattern of a config as transformers builds it: "layer_types" when given, else (hybrid configs that
// carry only "full_attention_interval", as Qwen3NextConfig / Qwen3_5TextConfig accept) layer i is "full_attention"
// when (i + 1) % interval == 0 and "linear_attention" otherwise. null when the config has neither.
nlohmann::json effective_layer_types(const nlohmann::json& text_config);

}  // namespace mi::ckb
