// Token embedding lookup: out[t] = table[ids[t]] widened to f32 (HF nn.Embedding over the BF16 weights, which
// the f32 reference holds exactly). The table is the checkpoint's model.embed_tokens.weight [vocab, hidden],
// used in place (memory-mapped), never copied.
#pragma once
#include <cstddef>

#include "common/bf16.h"
#include "common/error.h"

namespace mi::model {

inline float widen_weight(float v) { return v; }
inline float widen_weight(bf16_t v) { return bf16_to_f32(v); }

// table [vocab, hidden]; ids [n]; out [n, hidden] f32. Throws on an id outside [0, vocab).
template <class W>
void embed_tokens(const W* table, int vocab, int hidden, const int* ids, int n, float* out) {
  for (int t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      fail("embedding: token id ", ids[t], " at position ", t, " is outside the vocabulary [0, ", vocab, ")");
  }
  for (int t = 0; t < n; ++t) {
    const W* row = table + std::size_t(ids[t]) * std::size_t(hidden);
    float* dst = out + std::size_t(t) * std::size_t(hidden);
    for (int i = 0; i < hidden; ++i) dst[i] = widen_weight(row[i]);
  }
}

}  // namespace mi::model
