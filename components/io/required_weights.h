// The checkpoint-completeness gate: before any compute, every tensor the model needs is present with the shape
// and dtype the config implies. The list comes from the family's knowledge (the generator emits it); a missing or
// misshapen tensor is reported by name with expected vs actual, instead of surfacing later as wrong numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace mi::io {

struct RequiredTensor {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // e.g. {num_heads * head_dim, hidden}
};

// mi::Error listing every missing tensor and every shape/dtype mismatch (expected vs actual), naming the
// checkpoint directory. Tensors in the store that are not required are allowed (e.g. rotary caches).
void check_required_weights(const WeightStore& store, const std::vector<RequiredTensor>& required, DType expected);

}  // namespace mi::io
