// The zero-centred RMSNorm of Qwen3.5 / Qwen3-Next (HF Qwen3_5RMSNorm, Qwen3NextRMSNorm): the checkpoint stores w
// centred on 0 and the reference computes y = x / sqrt(mean(x^2) + eps) * (1 + w), with 1 + w taken in f32. Adding 1
// to the widened weight once at load makes it the plain rmsnorm contract's weight (model/rms_norm.h), and since the
// reference's 1 + w is the same f32 addition, the product is bitwise the one the reference forms.
// Which weights get it is knowledge: the family's [[weights]] entries say norm = "1+w" (the gated norm of the
// linear-attention output, norm = "w", does not).
#pragma once
#include <vector>

namespace mi::model {

// w (widened to f32) -> 1 + w, in place.
inline void fold_one_plus_w(std::vector<float>& w) {
  for (float& v : w) v = 1.0f + v;
}

}  // namespace mi::model
