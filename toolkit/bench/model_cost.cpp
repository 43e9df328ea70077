#include "bench/model_cost.h"

#include <algorithm>
#include <string_view>

#include "common/error.h"
#include "constraints/constraints.h"
#include "io/safetensors.h"

namespace mi::bench {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

int dim(const nlohmann::json& dims, const char* key) {
  const int v = dims.value(key, 0);
  if (v <= 0) fail("plan.json: model.dims.", key, " is missing or not positive");
  return v;
}

}  // namespace

double ModelCost::decode_bound_tok_s(double bandwidth_gbs, int prompt, int gen) const {
  const double steps = std::max(1, gen - 1);
  // sum over i = 1..steps of (prompt + i) positions
  const double positions = steps * prompt + steps * (steps + 1) / 2;
  const double bytes = steps * double(decode_weight_bytes) + kv_bytes_per_position * positions;
  return steps / (bytes / (bandwidth_gbs * 1e9));
}

double ModelCost::prefill_bound_tok_s(double gflops) const { return gflops * 1e9 / (2.0 * prompt_params); }

std::size_t ModelCost::decode_working_set(int context) const {
  return decode_weight_bytes + std::size_t(kv_bytes_per_position * std::max(0, context));
}

nlohmann::json ModelCost::to_json() const {
  return {{"dtype", dtype},
          {"layers", layers},
          {"kv_heads", kv_heads},
          {"head_dim", head_dim},
          {"vocab_size", vocab},
          {"max_context", max_context},
          {"tied_embeddings", tied_embeddings},
          {"weight_bytes", weight_bytes},
          {"decode_weight_bytes_per_token", decode_weight_bytes},
          {"kv_bytes_per_position", kv_bytes_per_position},
          {"params", total_params},
          {"prompt_params_per_token", prompt_params}};
}

ModelCost model_cost(const nlohmann::json& plan, const std::filesystem::path& checkpoint) {
  ModelCost c;
  const auto& model = plan.at("model");
  const auto& dims = model.at("dims");
  c.dtype = model.at("weights").value("dtype", "");
  c.layers = dim(dims, "num_hidden_layers");
  c.kv_heads = dim(dims, "num_key_value_heads");
  c.head_dim = dims.contains("head_dim") ? dim(dims, "head_dim") : dim(dims, "hidden_size") / dim(dims, "num_attention_heads");
  c.vocab = dim(dims, "vocab_size");
  c.max_context = plan.at("constraints").value("max_context", 0);
  c.kv_bytes_per_position = 2.0 * c.layers * c.kv_heads * c.head_dim * constraints::kv_element_bytes(plan.at("constraints"));

  const io::WeightStore store = io::WeightStore::open(checkpoint);
  const io::TensorView* embed = nullptr;
  bool lm_head = false;
  for (const std::string& name : store.names()) {
    const io::TensorView& t = store.get(name);
    c.weight_bytes += t.nbytes;
    c.total_params += double(t.numel());
    if (ends_with(name, "embed_tokens.weight")) embed = &t;
    else if (ends_with(name, "lm_head.weight")) lm_head = true;
    else if (t.shape.size() == 2) c.prompt_params += double(t.numel());
  }
  c.tied_embeddings = !lm_head;
  c.decode_weight_bytes = c.weight_bytes;
  if (embed && lm_head && !embed->shape.empty() && embed->shape[0] > 0)  // untied: one row of the table per token
    c.decode_weight_bytes -= embed->nbytes - embed->nbytes / std::size_t(embed->shape[0]);
  // int8 engines (ckb/contracts/int8_weights.toml) read each projection and the LM head as 1 byte per weight plus
  // one f32 scale per row, the embedding row of the token as stored, and the norm vectors as stored.
  if (plan.at("platform").value("dtype", "") == "int8") {
    c.decode_weight_bytes = 0;
    for (const std::string& name : store.names()) {
      const io::TensorView& t = store.get(name);
      if (t.shape.size() != 2) {
        c.decode_weight_bytes += t.nbytes;
      } else if (&t == embed) {
        c.decode_weight_bytes += t.nbytes / std::size_t(std::max<int64_t>(1, t.shape[0]));  // the looked-up row
        if (c.tied_embeddings) c.decode_weight_bytes += std::size_t(t.numel()) + std::size_t(t.shape[0]) * sizeof(float);
      } else {
        c.decode_weight_bytes += std::size_t(t.numel()) + std::size_t(t.shape[0]) * sizeof(float);
      }
    }
  }
  if (c.prompt_params <= 0) fail(checkpoint.string(), ": no 2-D weights besides the embedding and LM head");
  return c;
}

}  // namespace mi::bench
