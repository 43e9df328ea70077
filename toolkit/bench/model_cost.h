// What one token costs the engine at least, from the engine's plan.json (model.dims) and the checkpoint's tensors:
// the bytes a decode step must read and the multiply-accumulates a prompt token must do. Divided into the machine's
// limits they give the bounds each result is shown against (README "Benchmarks"):
//   decode bound tok/s  = read bandwidth / (weight bytes read per token + KV bytes read at that context)
//   prefill bound tok/s = peak FLOP/s / (2 x parameters multiplied per prompt token)
// Both count only work no engine can skip, so no correct engine exceeds them:
//   - weight bytes per decode token: every tensor, except that an untied embedding table is read one row per token
//     (a tied one is read whole, as the LM head);
//   - KV bytes at context c: 2 (K and V) x layers x kv_heads x head_dim x c x the cache's element size (4 bytes: f32
//     by default; 2: bf16 when runtime.kv_dtype = "bf16" and the engine's default numerics is fast, runtime/kv_cache.h);
//   - parameters per prompt token: the 2-D weights except the embedding table and the LM head (the LM head runs for
//     the last prompt position only); attention's own FLOPs are left out.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace mi::bench {

struct ModelCost {
  std::string dtype;                    // stored weight dtype (plan model.weights.dtype); int8 engines: see model_cost()
  int layers = 0, kv_heads = 0, head_dim = 0, vocab = 0, max_context = 0;
  bool tied_embeddings = false;
  std::size_t weight_bytes = 0;         // every tensor
  std::size_t decode_weight_bytes = 0;  // read per decode token
  double total_params = 0;
  double prompt_params = 0;             // multiplied per prompt token
  double kv_bytes_per_position = 0;

  // Steps 1..gen-1 of a (prompt, gen) cell: step i attends prompt + i positions.
  double decode_bound_tok_s(double bandwidth_gbs, int prompt, int gen) const;
  double prefill_bound_tok_s(double gflops) const;
  // Bytes a decode step touches at `context` positions: the working set the bandwidth bound is measured for.
  std::size_t decode_working_set(int context) const;
  nlohmann::json to_json() const;
};

// From the engine's plan.json and the checkpoint directory (config.json + safetensors). mi::Error when either is
// unreadable or the dims are missing.
ModelCost model_cost(const nlohmann::json& plan, const std::filesystem::path& checkpoint);

}  // namespace mi::bench
