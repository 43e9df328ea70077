// Gated RMSNorm on the Gated DeltaNet output (Yang, Kautz, Hatamizadeh, ICLR 2025: output norm then a SiLU output
// gate from the z projection), per value head over dv:
//   y = rmsnorm(x) * w * silu(z),   rmsnorm(x) = x / sqrt(mean(x^2) + eps)
// The order is the contract (experience rule BUG-005-2): normalise first, then gate. w multiplies as stored (not
// 1 + w; the checkpoint's linear_attn.norm.weight is centred on 1), shared by every head.
#pragma once
#include <algorithm>
#include <cstddef>

#include "model/rms_norm.h"
#include "runtime/thread_pool.h"

namespace mi::model {

//   x [rows, heads * head_dim] row stride ldx       (the delta rule's output)
//   z [rows, heads * head_dim] row stride ldz       (the gate projection, e.g. in_proj_z's output)
//   w [head_dim] f32 (widened once)
//   y [rows, heads * head_dim] row stride ldy; may alias x (each slice is read by rmsnorm before it is written)
template <class K>
void rms_norm_gated(runtime::ThreadPool& pool, const float* x, std::size_t ldx, const float* z, std::size_t ldz,
                    const float* w, float* y, std::size_t ldy, int rows, int heads, int head_dim, float eps) {
  pool.parallel_for(rows * heads, std::max(16, kNormElementsPerChunk / std::max(head_dim, 1)), [&](int s0, int s1) {
    for (int s = s0; s < s1; ++s) {
      const std::size_t r = std::size_t(s / heads), off = std::size_t(s % heads) * std::size_t(head_dim);
      float* ys = y + r * ldy + off;
      K::rmsnorm(x + r * ldx + off, w, ys, head_dim, eps);
      K::silu_mul(z + r * ldz + off, ys, ys, head_dim);  // elementwise: reading and writing ys in place is safe
    }
  });
}

}  // namespace mi::model
