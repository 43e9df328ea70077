// The forward steps the generator writes out: the code of each step the CKB's contracts declare (`steps` in
// ckb/contracts/*.toml, the vocabulary lint and coverage read). The model emitter reads this table; coverage asks it
// which declared steps have an emitter (the others are gaps); CkbSteps.GeneratorStepTableAndContractStepsAgree keeps
// it and the contracts in agreement. A step id is what a family's [forward] or [[layer_kinds]] forward list names;
// each entry is the C++ the step becomes inside a layer function of
// the emitted src/model.h, in two forms:
//   chunk: T tokens of one sequence `seq` starting at position `start` (prefill chunks, single-sequence decode);
//   batch: one decode token of each of T distinct sequences, row b = seqs[b] at positions[b] (forward_batch).
// Most steps are row-wise and identical in both; only those touching per-sequence state (rotary, attention, conv1d,
// the delta rule) differ. In scope in a layer function: `w` (the layer's LayerWeights), `slot` (the layer's index
// among the layers sharing its KV cache or recurrent state), `T`, and seq/start or seqs/positions. Every step names
// the scratch buffers (Model members) it reads or writes, so the emitter allocates exactly those, each with its shape.
#pragma once
#include <string>
#include <vector>

namespace mi::generator {

struct ScratchBuffer {
  std::string name;   // Model member, e.g. "x_"
  std::string type;   // element type: "float", "int", "float*", ...
  std::string count;  // elements: a C++ expression over T (tokens per step), threads, max_context, max_batch and
                      // the Model's constants
  std::string shape;  // the shape comment written beside the member
};

struct ForwardStep {
  std::string id;
  std::vector<std::string> buffers;  // scratch buffers used (ScratchBuffer names)
  std::string chunk;                 // code for T tokens of one sequence
  std::string batch;                 // code for a batched decode step; empty: the same as chunk
  // Widths of the activations this step feeds to linear layers (bf16-rounded first in fast numerics): they size the
  // rounding buffer.
  std::vector<std::string> matmul_input_widths;
  bool uses_kv_cache = false;         // reads/writes the paged KV cache at layer `slot`
  bool uses_recurrent_state = false;  // reads/writes the recurrent state at linear layer `slot`
  std::string dims;                   // constant group it needs beyond the dense ones: "", "gdn", "moe"
  std::string bind;                   // code run per layer after the layer's weights are bound (`w` in scope)
};

// Every step the generator can emit, layer steps and final steps.
const std::vector<ForwardStep>& forward_steps();
// nullptr when the generator has no emitter for `id`.
const ForwardStep* find_forward_step(const std::string& id);
// Throws mi::Error for an unknown buffer name (a bug in the table).
const ScratchBuffer& scratch_buffer(const std::string& name);

}  // namespace mi::generator
