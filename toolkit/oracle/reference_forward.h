// The acceptance oracle: a plain reference forward pass of a decoder, in double precision, written from the model
// specification (Hugging Face semantics of Qwen3ForCausalLM, LlamaForCausalLM, Qwen3_5ForCausalLM /
// Qwen3_5ForConditionalGeneration (text only) and Qwen3NextForCausalLM; see tests/data/golden/README.md and
// ckb/families/), in the spirit of llama2.c's run.c.
//
// It is the one second assembly of a forward pass metainfer has: where no golden trace exists for a checkpoint the
// gates run the generated engine and this oracle on the same weights and compare. To be an independent judge it
// shares no code with the engines: nothing here (or in reference_checkpoint.*) includes anything from components/
// (enforced by tests/unit/toolkit_oracle). It is itself checked against every Hugging Face golden trace.
//
// Every layer: x += mixer(RMSNorm(x)); x += mlp(RMSNorm(x)); then the final RMSNorm and the LM head (the embedding
// matrix when tie_word_embeddings). RMSNorm multiplies by w (dense families) or by (1 + w) (the hybrids, whose
// input/post/final and q/k norm weights are stored zero-centred). The mixer, per config layer_types:
//   full_attention:   q,k,v projections -> [Qwen3, hybrids: per-head RMSNorm on q and k] -> rotary (rotate-half, on
//                     the first rotary_dim dims of each head: all of them, or head_dim * partial_rotary_factor for the
//                     hybrids) -> causal GQA softmax attention over the KV cache -> [hybrids: * sigmoid(gate), the
//                     gate being the second half of each head's q_proj rows] -> o_proj
//   linear_attention: Gated DeltaNet (Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta
//                     Rule", ICLR 2025), hybrids only: projections to q,k,v, z, b, a -> causal depthwise conv1d over
//                     [q|k|v] + SiLU -> per-head L2 norm of q and k, q / sqrt(dk) -> the gated delta rule, computed
//                     recurrently token by token (S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q) -> gated
//                     RMSNorm (w * RMSNorm(o) * silu(z)) -> out_proj
// The MLP: SwiGLU down(silu(gate) * up); for Qwen3NextForCausalLM a sparse MoE of SwiGLU experts (softmax router,
// top-k, optionally renormalised) plus a shared SwiGLU expert scaled by sigmoid(shared_expert_gate x).
// Weights stay in their stored dtype (mapped) and are converted to double row by row; everything else is double.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "oracle/reference_checkpoint.h"

namespace mi::oracle {

// How the projection weights are read. none: as stored (the model itself). int8_per_row: as an int8 engine computes
// with them (ckb/contracts/int8_weights.toml): every projection and the LM head (q, k, v, o, gate, up, down,
// lm_head or the tied embedding used as the head) quantised row by row - scale max|w|/127 in float32, codes
// rne(w / scale) clamped to [-127, 127] - and used as code * scale; embedding lookups and norms stay as stored.
enum class WeightQuantization { none, int8_per_row };

class ReferenceModel {
 public:
  // Loads and validates config.json and every weight the forward needs (names, shapes, dtypes). OracleError naming
  // the file and the field or tensor on anything malformed or not implemented. `threads` >= 1 splits the output
  // rows of every projection across that many std::threads. `quant` int8_per_row is defined (by its contract) for the
// dense families only; a hybrid checkpoint with it is an OracleError.
  explicit ReferenceModel(const std::filesystem::path& checkpoint_dir, int threads = 1,
                          WeightQuantization quant = WeightQuantization::none);
  ReferenceModel(ReferenceModel&&) noexcept;
  ReferenceModel& operator=(ReferenceModel&&) noexcept;
  ~ReferenceModel();

  int vocab_size() const;
  std::string architecture() const;  // the config's architectures[0], e.g. "Qwen3ForCausalLM"
  const ReferenceConfig& config() const;
  int threads() const;

  // The state of one sequence: how many tokens it holds and, per layer, its cache: the keys (after rotary) and
  // values of every position for a full-attention layer; the conv window and the recurrent state for a Gated
  // DeltaNet layer (fixed size, whatever the length).
  struct Sequence {
    struct LayerCache {
      std::vector<double> k, v;   // full attention: [length, num_kv_heads * head_dim] each, appended row by row
      std::vector<double> conv;   // DeltaNet: the last K-1 pre-conv [q|k|v] vectors, oldest first, [K-1, C]
                                  // (C = 2 nk dk + nv dv; zeros before the sequence start)
      std::vector<double> state;  // DeltaNet: S per value head, [nv, dk, dv], zeros at the start
    };
    int length = 0;  // tokens seen so far = the position of the next token
    std::vector<LayerCache> layers;
  };
  Sequence new_sequence() const;

  // Runs `ids` at positions seq.length, seq.length+1, ... (one causal forward, the cache extended), and returns the
  // logits of appended positions logits_from .. ids.size()-1, row-major [ids.size() - logits_from, vocab].
  // Default: every appended position. OracleError on an id outside [0, vocab) or an empty `ids`.
  std::vector<double> append(Sequence& seq, const std::vector<int>& ids, int logits_from = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One greedy step: the chosen id (argmax; the lowest id on an exact tie, as torch.argmax), the top-1 minus top-2
// logit, and the top-2 id.
struct GreedyStep {
  int id = 0;
  double margin = 0;
  int runner_up = 0;
};

// Greedy generation: prefill `prompt` (not empty), then n_new steps (nothing stops early).
std::vector<GreedyStep> greedy(const ReferenceModel& model, const std::vector<int>& prompt, int n_new);

// Teacher-forced: one causal forward over prompt + continuation; row t of the result ([continuation.size(), vocab],
// row-major) is the distribution continuation[t] was chosen from, i.e. the logits at position prompt.size()-1+t.
std::vector<double> teacher_forced_logits(const ReferenceModel& model, const std::vector<int>& prompt,
                                          const std::vector<int>& continuation);

}  // namespace mi::oracle
