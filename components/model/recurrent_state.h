// Per-sequence recurrent state of the linear-attention (Gated DeltaNet) layers of a hybrid model, kept beside the
// KV blocks: the full-attention layers keep using runtime::KvCache, the linear layers keep a fixed-size state per
// sequence that does not grow with the context:
//   conv  [K-1, C]            the causal conv1d's last K-1 inputs   (model/causal_conv1d.h)
//   delta [v_heads, dv, dk]   the gated delta rule's S, transposed  (model/gated_delta_rule.h)
// for every linear layer. Indexed by the KvCache sequence id (a slot in [0, max_sequences)), allocated once at
// engine start, zeroed when a sequence starts (clear), so a decode step allocates nothing.
//
// Prefix caching: a KV prefix hit restores the attention layers' past, but the recurrent state at the end of the
// cached prefix is not in the KV blocks; it is only known by running the prefix. An engine with linear layers must
// therefore not attach a cached prefix (or must recompute the whole prompt) unless it also holds a snapshot of this
// state taken exactly at that prefix boundary. This struct keeps no snapshots, so hybrid engines run with the KV
// prefix cache off (ckb/contracts/recurrent_state.toml).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/error.h"
#include "model/causal_conv1d.h"
#include "model/gated_delta_rule.h"

namespace mi::model {

struct RecurrentStateShape {
  int linear_layers = 0;   // number of linear-attention layers (their index among the linear layers, not the model)
  Conv1dDims conv;         // C = the conv channels (q, k and v of all heads), K = the kernel width
  GatedDeltaDims delta;
  int max_sequences = 1;   // as KvCacheShape::max_sequences
};

class RecurrentStateCache {
 public:
  explicit RecurrentStateCache(const RecurrentStateShape& shape)
      : shape_(shape),
        conv_floats_(conv1d_state_floats(shape.conv)),
        delta_floats_(gated_delta_state_floats(shape.delta)),
        per_layer_(conv_floats_ + delta_floats_),
        per_sequence_(per_layer_ * std::size_t(std::max(shape.linear_layers, 0))) {
    if (shape.linear_layers < 0 || shape.max_sequences <= 0)
      fail("recurrent state: linear_layers (", shape.linear_layers, ") must be >= 0 and max_sequences (",
           shape.max_sequences, ") positive");
    storage_.assign(per_sequence_ * std::size_t(shape.max_sequences), 0.0f);  // one allocation, all zero
  }

  const RecurrentStateShape& shape() const { return shape_; }
  std::size_t floats_per_sequence() const { return per_sequence_; }
  std::size_t bytes() const { return storage_.size() * sizeof(float); }

  // [K-1, C] conv state of linear layer `layer` (0-based among the linear layers) of sequence `seq`.
  float* conv(int seq, int layer) { return base(seq, layer); }
  // [v_heads, dv, dk] delta-rule state.
  float* delta(int seq, int layer) { return base(seq, layer) + conv_floats_; }

  // Zeroes every state of the sequence: call when a sequence (slot) starts.
  void clear(int seq) {
    check_seq(seq);
    std::fill_n(storage_.begin() + std::ptrdiff_t(std::size_t(seq) * per_sequence_), per_sequence_, 0.0f);
  }

 private:
  void check_seq(int seq) const {
    if (seq < 0 || seq >= shape_.max_sequences)
      fail("recurrent state: sequence ", seq, " out of range (max_sequences ", shape_.max_sequences, ")");
  }
  float* base(int seq, int layer) {
    check_seq(seq);
    if (layer < 0 || layer >= shape_.linear_layers)
      fail("recurrent state: linear layer ", layer, " out of range (linear_layers ", shape_.linear_layers, ")");
    return storage_.data() + std::size_t(seq) * per_sequence_ + std::size_t(layer) * per_layer_;
  }

  RecurrentStateShape shape_;
  std::size_t conv_floats_, delta_floats_, per_layer_, per_sequence_;
  std::vector<float> storage_;  // [max_sequences, linear_layers, (conv [K-1, C] | delta [v_heads, dv, dk])]
};

}  // namespace mi::model
