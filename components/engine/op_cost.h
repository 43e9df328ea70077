// Bytes moved and FLOPs done by one call of each op of a generated forward step (the op names of Model::op_names()),
// for `ENGINE bench --profile`: what the op must at least read and write, to set its time beside the machine's bound.
//   weights: every element of the op's matrices once per call (bf16 2 bytes, f32 4, int8 1; an unknown dtype
//            counts 0 and the report says so); activations f32 read and written once.
//   attention: the cached keys and values of every position attended, once per KV head (a GQA group shares them;
//            reading them again per query head is a loss the profile shows), plus the new rows read (f32) and stored, at the
//            cache's element size (f32 4 bytes; bf16 2 in fast numerics with runtime.kv_dtype = "bf16"); FLOPs
//            4 x head_dim per (query head, attended position): q.k and p.v.
//   FLOPs: 2 per multiply-add; norms, rotary, residual and softmax counted with a small constant per element.
// A step is T new tokens at positions [start, start + T); `rows` is how many rows reach the final norm and LM head.
#pragma once
#include <cstdint>
#include <string>

namespace mi::engine {

struct OpCost {
  double bytes = 0;
  double flops = 0;
};

struct OpCostModel {
  int vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double weight_bytes = 0;  // per weight element; 0 when the dtype is not known here
  double kv_bytes = 4;      // per cached key / value element: 4 (f32) or 2 (bf16: fast numerics, runtime.kv_dtype)

  static double bytes_per_weight(const std::string& dtype) {
    if (dtype == "bf16" || dtype == "f16") return 2;
    if (dtype == "f32") return 4;
    if (dtype == "int8") return 1;
    return 0;
  }

  // nullopt-like: known == false for an op name this model does not cost.
  OpCost per_call(const std::string& op, int T, int start, int rows, bool* known = nullptr) const {
    const double t = T, H = hidden, I = intermediate, Q = double(heads) * head_dim, KV = double(kv_heads) * head_dim,
                 W = weight_bytes, A = 4, r = rows;
    if (known) *known = true;
    if (op == "embed") return {t * H * (W + A), 0};
    if (op == "input_norm" || op == "post_attention_norm") return {2 * t * H * A + H * A, 4 * t * H};
    if (op == "qkv_proj") return {(Q + 2 * KV) * H * W + t * (H + Q + 2 * KV) * A, 2 * t * H * (Q + 2 * KV)};
    if (op == "qk_norm") return {2 * t * (Q + KV) * A, 4 * t * (Q + KV)};
    if (op == "rope") return {2 * t * (Q + KV) * A, 3 * t * (Q + KV)};
    if (op == "attention") {
      const double attended = t * start + t * (t + 1) / 2;  // sum over new tokens of the positions each sees
      return {double(start + T) * 2 * KV * kv_bytes + t * 2 * KV * (A + kv_bytes) + 2 * t * Q * A,
              4 * head_dim * double(heads) * attended};
    }
    if (op == "o_proj") return {Q * H * W + t * (Q + H) * A, 2 * t * Q * H};
    if (op == "residual_add") return {3 * t * H * A, t * H};
    if (op == "swiglu_mlp") return {3 * H * I * W + t * (2 * H + 3 * I) * A, 6 * t * H * I + 4 * t * I};
    if (op == "final_norm") return {2 * r * H * A + H * A, 4 * r * H};
    if (op == "lm_head") return {double(vocab) * H * W + r * (H + vocab) * A, 2 * r * vocab * H};
    if (known) *known = false;
    return {};
  }
};

}  // namespace mi::engine
