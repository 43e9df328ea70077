// Log-probabilities of a sampled token and of the most likely alternatives, from the model's raw logits (before
// temperature, top-k/p or penalties: the model's own distribution, as OpenAI-compatible servers report it):
//   logprob(i) = logit(i) - log(sum_j exp(logit(j)))     (max-shifted, summed in double)
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace mi::server {

struct RawLogprobs {
  float chosen = 0;                              // logprob of `token`
  std::vector<std::pair<int32_t, float>> top;    // the `top` most likely ids, most likely first (ties: lower id)
};

// logits: [vocab]; 0 <= token < vocab; 0 <= top <= vocab.
RawLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace mi::server
