// Writing safetensors files and Hugging Face checkpoint weight layouts (used by `metainfer synth-model` and by
// tests that need valid or deliberately corrupt checkpoints).
// Output is deterministic: tensors are laid out by element size (largest first, so every tensor stays aligned to
// its element size), then by name; the JSON header lists "__metadata__" first, then the tensors in data order,
// and is padded with spaces so the data starts at an 8-byte boundary (as the reference writer does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace mi::io {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // nbytes bytes, little-endian elements, row-major
  std::size_t nbytes = 0;      // must equal numel(shape) * dtype_size(dtype)
};

// Writes one safetensors file. mi::Error on duplicate names, a size that does not match the shape, or I/O failure.
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes DIR/model.safetensors, or, when the tensors' total exceeds max_shard_bytes, the shards
// model-00001-of-0000N.safetensors ... (tensors taken in the given order, a new shard started whenever the next
// tensor would overflow the current one; a tensor larger than the limit gets a shard of its own) plus
// model.safetensors.index.json {"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}, as Hugging
// Face's save_pretrained does. Each file carries the metadata {"format": "pt"}. DIR is created if needed.
void write_checkpoint_weights(const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
                              std::size_t max_shard_bytes = std::size_t(2) << 30);

}  // namespace mi::io
