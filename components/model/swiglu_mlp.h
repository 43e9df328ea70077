// SwiGLU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer"; HF LlamaMLP / Qwen3MLP):
//   out = down( silu(gate(x)) * up(x) ),   gate/up [intermediate, hidden], down [hidden, intermediate].
// Numerics N as in linear.h: in fast mode x and the activation product are rounded to bf16 before their matmuls.
#pragma once
#include <algorithm>
#include <cstddef>

#include "model/linear.h"

namespace mi::model {

template <Numerics N>
struct MlpScratch {
  float* gate;                  // [M, intermediate]
  float* up;                    // [M, intermediate]
  float* act;                   // [M, intermediate]
  MatmulInput<N>* x_rounded;    // [M, hidden]        (fast only; may be null in precise)
  MatmulInput<N>* act_rounded;  // [M, intermediate]  (fast only; may be null in precise)
};

//   x [M, hidden] f32 (already normalised), out [M, hidden] f32 (not aliasing x).
template <class K, Numerics N, class W>
void swiglu_mlp(runtime::ThreadPool& pool, const W* gate_proj, const W* up_proj, const W* down_proj, int hidden,
                int intermediate, const float* x, int M, float* out, const MlpScratch<N>& scratch) {
  const std::size_t inter_floats = std::size_t(M) * std::size_t(intermediate);
  const MatmulInput<N>* xin = matmul_input<K, N>(pool, x, std::size_t(M) * std::size_t(hidden), scratch.x_rounded);
  linear_parts<K>(pool, hidden, xin, M, part(gate_proj, intermediate, scratch.gate), part(up_proj, intermediate, scratch.up));
  // A few rows (decode, batched decode) run on the calling thread: splitting them costs a pool wake-up for ~1 us of
  // work (16384 elements per chunk, as the norms: model/rms_norm.h).
  constexpr int kSiluElementsPerChunk = 16384;
  pool.parallel_for(M, std::max(1, kSiluElementsPerChunk / std::max(intermediate, 1)), [&](int m0, int m1) {
    const std::size_t offset = std::size_t(m0) * std::size_t(intermediate);
    K::silu_mul(scratch.gate + offset, scratch.up + offset, scratch.act + offset, (m1 - m0) * intermediate);
  });
  const MatmulInput<N>* ain = matmul_input<K, N>(pool, scratch.act, inter_floats, scratch.act_rounded);
  linear<K>(pool, down_proj, hidden, intermediate, ain, M, out);
}

}  // namespace mi::model
