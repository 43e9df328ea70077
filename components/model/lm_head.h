// The language-model head: logits = x W^T with W = lm_head.weight [vocab, hidden], or model.embed_tokens.weight
// when the checkpoint ties them (tie_word_embeddings; the tied head is stored once, as the embedding).
// x is the final-normed hidden state of the positions whose logits are wanted (the last one when decoding).
#pragma once
#include "model/linear.h"

namespace mi::model {

//   x [M, hidden] (f32, or bf16 from matmul_input in fast mode), logits [M, vocab] f32
template <class K, class W, class X>
void lm_head(runtime::ThreadPool& pool, const W* weight, int vocab, int hidden, const X* x, int M, float* logits) {
  linear<K>(pool, weight, vocab, hidden, x, M, logits);
}

// Greedy choice: index of the largest logit, the lowest index on ties (as torch.argmax).
inline int greedy_token(const float* logits, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace mi::model
