// `metainfer synth-model`: a random-initialised checkpoint in real Hugging Face layout (config.json with the real
// family's dimensions for the preset, model.safetensors or shards + index above 2 GB, generation_config.json and the
// family's tokenizer files), so examples and benchmarks run without downloading weights. Deterministic for a seed:
// every tensor is drawn from counter-based streams keyed by (seed, tensor name, chunk), whatever the thread count.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "ckb/ckb.h"

namespace mi::synth {

struct SynthOptions {
  std::string family = "qwen3";  // a ckb/families id with [presets]
  std::string preset = "tiny";
  std::string dtype = "bf16";    // bf16 | f32
  uint64_t seed = 0;
  std::filesystem::path out;
  std::filesystem::path tokenizer_cache;  // where setup.sh put <tokenizer>/tokenizer.json; empty = none
  bool with_tokenizer = true;
  bool force = false;                      // allow writing into a non-empty directory
  std::size_t max_shard_bytes = std::size_t(2) << 30;
  int threads = 0;                         // 0 = hardware concurrency
};

struct SynthResult {
  std::size_t parameters = 0;
  std::size_t bytes = 0;
  int shards = 1;
  bool tokenizer = false;
};

SynthResult synth_model(const ckb::Ckb& ckb, const SynthOptions& options);

}  // namespace mi::synth
