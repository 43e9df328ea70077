// What the engine runtime (components/engine/*, components/runtime/scheduler, sampler) needs from a model.
// The generator writes, for each engine, src/model.h defining `class engine::Model` that satisfies this concept
// with the model's dimensions, layer pattern, kernel level and weight names fixed at build time (no runtime
// dispatch on model family). Engine runtime code is written against this concept only.
#pragma once
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mi::engine {

// Sizes of the runtime state, from the constraints (the generator writes their defaults into engine_config.h;
// the engine's command line may lower them).
struct RuntimeOptions {
  int threads = 1;
  int max_batch = 1;      // sequences alive at once
  int max_context = 512;  // tokens per sequence (prompt + generated)
  int kv_block_size = 16;
  int kv_blocks = 0;      // blocks in the KV pool; 0 = max_batch x ceil(max_context / kv_block_size)
  bool fast = false;      // numerics: false = precise (f32 activations), true = fast (bf16 activations)
};

// Static facts about the compiled model (generated as constexpr members of engine::Model).
struct ModelFacts {
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  std::string family;        // CKB family id
  std::string kernel_level;  // e.g. "avx512bf16"
  int vocab_size = 0;
  int max_position_embeddings = 0;
};

template <class M>
concept EngineModel = requires(M m, const M cm, int seq, const int32_t* ids, int n, float* logits) {
  // M(const std::filesystem::path& checkpoint_dir, const RuntimeOptions&): maps the weights, checks every required
  // tensor (name, shape, dtype) before any compute, allocates the KV cache and all scratch once. mi::Error naming
  // the tensor/field on a bad checkpoint.
  { cm.facts() } -> std::convertible_to<ModelFacts>;
  { cm.vocab_size() } -> std::convertible_to<int>;
  { m.new_sequence() } -> std::convertible_to<int>;  // mi::Error when max_batch sequences are alive
  { m.free_sequence(seq) };
  { cm.sequence_length(seq) } -> std::convertible_to<int>;  // tokens in the KV cache of seq
  // Appends n tokens to seq (prefill chunk or one decode token) and writes the logits of the LAST token [vocab]
  // to `logits` (or of every token [n, vocab] when all_rows). mi::Error if the context would overflow.
  { m.forward(seq, ids, n, logits, false) };
  { cm.eos_token_ids() } -> std::convertible_to<std::vector<int>>;  // from config/generation/tokenizer configs
};

// A model generated with the batched decode path (constraints runtime.max_batch >= 2; an engine generated for one
// sequence at a time does not carry it, and the runtime code that can use it asks with this concept).
template <class M>
concept BatchedEngineModel = EngineModel<M> && requires(M m, const int* seqs, const int32_t* ids, int n, float* logits) {
  // One decode step of n distinct live sequences seqs[0, n): appends ids[b] to seqs[b] and writes the logits of each
  // new token, [n, vocab] (row b for seqs[b]). mi::Error, changing nothing, when n is not in 1..max_batch, a sequence
  // is repeated, not alive or full, or an id is outside the vocabulary.
  { m.forward_batch(seqs, ids, n, logits) };
};

}  // namespace mi::engine
