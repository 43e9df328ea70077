#include "server/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mi::server {

RawLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  float max_logit = -INFINITY;
  for (const float x : logits) max_logit = std::max(max_logit, x);
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x) - double(max_logit));
  const double log_z = double(max_logit) + std::log(sum);
  RawLogprobs r;
  r.chosen = float(double(logits[std::size_t(token)]) - log_z);
  if (top > 0) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto more_likely = [&](int32_t a, int32_t b) {
      return logits[std::size_t(a)] != logits[std::size_t(b)] ? logits[std::size_t(a)] > logits[std::size_t(b)] : a < b;
    };
    const std::size_t k = std::min(std::size_t(top), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), more_likely);
    for (std::size_t i = 0; i < k; ++i) r.top.push_back({ids[i], float(double(logits[std::size_t(ids[i])]) - log_z)});
  }
  return r;
}

}  // namespace mi::server
